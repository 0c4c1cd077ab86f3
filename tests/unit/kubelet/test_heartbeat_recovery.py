"""After a partition heals, the kubelet replaces its pod watches' connection (Kubernetes'
kubelet closes all its connections on repeated heartbeat failures): a watch cut by the
partition can stay silent for many seconds after the network is back (seen once in a full
run: db-0's deletion never reached its kubelet within 20 s of the heal)."""

from __future__ import annotations

import asyncio
import copy
from typing import cast

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import FakeClock
from skiff.kubelet.node import NodeAgent


class Heartbeats:
    """Lease reads and writes that fail while `down` is set."""

    def __init__(self) -> None:
        self.down = False
        self.lease: Obj = {"metadata": {"name": "node-1", "namespace": "kube-node-lease"},
                           "spec": {}}

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        return await self.update(self.lease)

    async def update(self, obj: Obj) -> Obj:
        if self.down:
            raise ApiError(Reason.SERVICE_UNAVAILABLE, "the apiserver is unavailable")
        self.lease = copy.deepcopy(obj)
        return copy.deepcopy(obj)


class Watches:
    """The main client: counts reconnects, as ApiClient.reconnect with a generation."""

    def __init__(self) -> None:
        self.generation = 0

    async def reconnect(self, *, generation: int | None = None) -> None:
        if generation is None or generation == self.generation:
            self.generation += 1


async def _run(outage: int) -> int:
    heartbeat, watches, clock = Heartbeats(), Watches(), FakeClock()
    agent = NodeAgent(api=cast(ApiClient, watches), heartbeat=cast(ApiClient, heartbeat),
                      clock=clock, node_name="node-1", labels={}, taints=[],
                      capacity={"cpu": "1"}, health_port=10248, lease_duration=40,
                      renew_interval=1, status_update_frequency=1, status_report_frequency=300)
    task = asyncio.create_task(agent.run_lease())

    async def tick() -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        clock.advance(1)
        for _ in range(20):
            await asyncio.sleep(0)

    try:
        await tick()
        heartbeat.down = True
        for _ in range(outage):
            await tick()
        heartbeat.down = False
        for _ in range(3):
            await tick()
    finally:
        task.cancel()
    return watches.generation


async def test_ps2_heartbeats_back_after_an_outage_reconnect_the_pod_watches_once() -> None:
    assert await _run(outage=5) == 1


async def test_ps2_one_failed_renewal_leaves_the_pod_watches_alone() -> None:
    assert await _run(outage=1) == 0
