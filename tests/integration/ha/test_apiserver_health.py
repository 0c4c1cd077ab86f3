"""An apiserver whose etcd member lost the quorum reports gRPC
health NOT_SERVING (so `skiff status` and clients see it), and SERVING again once healed;
its HTTP `/readyz` fails the etcd check meanwhile, as kube-apiserver's does, so a front or
load balancer reading it stops sending requests there."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.cluster.processes import free_port
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


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz?verbose",
                                    timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return -1, ""


async def test_issue11_apiserver_health_not_serving_while_its_etcd_member_has_no_quorum(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_etcd_cluster(3)
    http = free_port()
    ha_cluster.add_apiserver(etcd_member=0, args=["--http-port", str(http)])
    target = ha_cluster.api_target(0)
    serving = health_pb2.HealthCheckResponse.SERVING
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    assert await _status(target) == serving
    code, body = _readyz(http)
    assert code == 200 and "[+]etcd ok" in body and body.endswith("readyz check passed\n")

    async def is_(status: int) -> bool:
        return await _status(target) == status

    for member in ha_cluster.etcd[1:]:
        freeze(member)  # etcd-1 alone: a minority
    try:
        await wait_for(lambda: is_(not_serving), timeout=60, interval=0.5,
                       what="the apiserver to report NOT_SERVING")
        code, body = _readyz(http)
        assert code == 500, body
        assert "[-]etcd failed: reason withheld" in body and "readyz check failed" in body
    finally:
        for member in ha_cluster.etcd[1:]:
            member.signal(signal.SIGCONT)
    await wait_for(lambda: is_(serving), timeout=60, interval=0.5,
                   what="the apiserver to report SERVING after the heal")
    assert _readyz(http)[0] == 200
