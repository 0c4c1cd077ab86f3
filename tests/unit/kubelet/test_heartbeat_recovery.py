"""After a partition heals, the kubelet replaces its pod watches' connection (Kubernetes'
kubelet closes all its connections on repeated heartbeat failures): a watch cut by the
partition can stay silent for many seconds after the network is back (seen once in a full
run: db-0's deletion never reached its kubelet within 20 s of the heal)."""

from __future__ import annotations

import asyncio

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.fake import Action, FakeClient
from skiff.clock import FakeClock
from skiff.kubelet.node import NodeAgent


class Outage:
    """A reactor: while `down`, every call fails as the unreachable apiserver's would."""

    def __init__(self) -> None:
        self.down = False

    def __call__(self, action: Action) -> Obj | None:
        if self.down:
            raise ApiError(Reason.SERVICE_UNAVAILABLE, "the apiserver is unavailable")
        return None


async def _run(outage: int) -> int:
    clock, cut = FakeClock(), Outage()
    heartbeat = FakeClient({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
                            "spec": {}}, clock=clock)
    heartbeat.prepend_reactor("*", "*", cut)
    watches = FakeClient(clock=clock)  # the main client: the pod watches' connection
    agent = NodeAgent(api=watches, heartbeat=heartbeat,
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
        cut.down = True
        for _ in range(outage):
            await tick()
        cut.down = False
        for _ in range(3):
            await tick()
    finally:
        task.cancel()
    return watches.generation


async def test_ps2_heartbeats_back_after_an_outage_reconnect_the_pod_watches_once() -> None:
    assert await _run(outage=5) == 1


async def test_ps2_one_failed_renewal_leaves_the_pod_watches_alone() -> None:
    assert await _run(outage=1) == 0
