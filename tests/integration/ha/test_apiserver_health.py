"""Issue 11 remainder, item 2: an apiserver whose etcd member lost the quorum reports gRPC
health NOT_SERVING (so `skiff status` and clients see it), and SERVING again once healed."""

from __future__ import annotations

import signal

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import freeze, wait_for


async def _status(target: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        try:
            resp = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=2.0)
        except grpc.aio.AioRpcError:
            return -1
    return int(resp.status)


async def test_issue11_apiserver_health_not_serving_while_its_etcd_member_has_no_quorum(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_etcd_cluster(3)
    ha_cluster.add_apiserver(etcd_member=0)
    target = ha_cluster.api_target(0)
    serving = health_pb2.HealthCheckResponse.SERVING
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    assert await _status(target) == serving

    async def is_(status: int) -> bool:
        return await _status(target) == status

    for member in ha_cluster.etcd[1:]:
        freeze(member)  # etcd-1 alone: a minority
    try:
        await wait_for(lambda: is_(not_serving), timeout=60, interval=0.5,
                       what="the apiserver to report NOT_SERVING")
    finally:
        for member in ha_cluster.etcd[1:]:
            member.signal(signal.SIGCONT)
    await wait_for(lambda: is_(serving), timeout=60, interval=0.5,
                   what="the apiserver to report SERVING after the heal")
