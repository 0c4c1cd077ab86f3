"""PS2 after a partition: the kubelet puts Ready back when another writer (the node
lifecycle controller) set it Unknown, without waiting for the 5-minute report frequency."""

from __future__ import annotations

import asyncio
import copy
from typing import cast

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import FakeClock
from skiff.kubelet.node import NodeAgent


class FakeNodes:
    def __init__(self) -> None:
        self.node: Obj = {"metadata": {"name": "node-1", "resourceVersion": "1"}, "status": {}}
        self.status_writes = 0

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        return copy.deepcopy(self.node)

    async def update_status(self, obj: Obj) -> Obj:
        self.status_writes += 1
        self.node = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def set_ready(self, status: str) -> None:
        for condition in self.node["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition["status"] = status


async def test_ps2_ready_unknown_set_by_the_controller_is_overwritten_at_the_next_update(
        ) -> None:
    api, clock = FakeNodes(), FakeClock()
    agent = NodeAgent(api=cast(ApiClient, api), clock=clock, node_name="node-1", labels={},
                      taints=[], capacity={"cpu": "1"}, health_port=10248, lease_duration=40,
                      renew_interval=10, status_update_frequency=10,
                      status_report_frequency=300)
    task = asyncio.create_task(agent.run_status())

    async def tick() -> None:
        for _ in range(20):  # let the loop reach its next sleep
            await asyncio.sleep(0)
        clock.advance(10)
        for _ in range(20):
            await asyncio.sleep(0)

    try:
        await tick()
        assert api.status_writes == 1  # the first status
        await tick()
        assert api.status_writes == 1  # unchanged and not due: no write
        api.set_ready("Unknown")  # the node lifecycle controller, during a partition
        await tick()
        assert api.status_writes == 2
        assert {c["type"]: c["status"] for c in api.node["status"]["conditions"]}["Ready"] \
            == "True"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
