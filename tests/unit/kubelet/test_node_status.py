"""PS2 after a partition: the kubelet puts Ready back when another writer (the node
lifecycle controller) set it Unknown, without waiting for the 5-minute report frequency."""

from __future__ import annotations

import asyncio
import copy

from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.kubelet.node import NodeAgent


def node(api: FakeClient) -> Obj:
    stored = api.stored("nodes", "node-1")
    assert stored is not None
    return stored


def status_writes(api: FakeClient) -> int:
    return len(api.calls("update_status", "nodes", failed=False))


def set_ready(api: FakeClient, status: str) -> None:
    """Another writer (the node lifecycle controller) sets the Ready condition."""
    changed = copy.deepcopy(node(api))
    for condition in changed["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = status
    api.add(changed)


def _agent(clock: FakeClock, *, cached: bool = False) -> tuple[FakeClient, NodeAgent]:
    """node-1 stored with no status, and its agent (reading the stored Node as an
    informer's copy when `cached`)."""
    api = FakeClient({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                      "status": {}}, clock=clock)
    agent = NodeAgent(api=api, clock=clock, node_name="node-1", labels={},
                      taints=[], capacity={"cpu": "1"}, health_port=10248, lease_duration=40,
                      renew_interval=10, status_update_frequency=10,
                      status_report_frequency=300,
                      cached_node=(lambda name: api.stored("nodes", name)) if cached else None)
    return api, agent


async def tick(clock: FakeClock) -> None:
    """Let the status loop reach its next sleep, then one update interval passes."""
    for _ in range(20):
        await asyncio.sleep(0)
    clock.advance(10)
    for _ in range(20):
        await asyncio.sleep(0)


async def test_ps2_ready_unknown_set_by_the_controller_is_overwritten_at_the_next_update(
        ) -> None:
    clock = FakeClock()
    api, agent = _agent(clock)
    task = asyncio.create_task(agent.run_status())

    try:
        await tick(clock)
        assert status_writes(api) == 1  # the first status
        await tick(clock)
        assert status_writes(api) == 1  # unchanged and not due: no write
        set_ready(api, "Unknown")  # the node lifecycle controller, during a partition
        await tick(clock)
        assert status_writes(api) == 2
        assert {c["type"]: c["status"] for c in node(api)["status"]["conditions"]}["Ready"] \
            == "True"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_ps2_hollow_nodes_check_the_informers_copy_of_their_node_without_a_get(
        ) -> None:
    """Hollow nodes (issue 37) read their stored Node from the process's Node informer: the
    same overwrite of Ready=Unknown, and no GET per node each status interval."""
    clock = FakeClock()
    api, agent = _agent(clock, cached=True)
    task = asyncio.create_task(agent.run_status())

    try:
        await tick(clock)
        await tick(clock)
        assert status_writes(api) == 1
        set_ready(api, "Unknown")
        await tick(clock)
        assert status_writes(api) == 2
        assert {c["type"]: c["status"] for c in node(api)["status"]["conditions"]}["Ready"] \
            == "True"
        assert api.calls("get", "nodes") == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_ps2_node_status_is_written_when_it_changes_beyond_its_heartbeat_times() -> None:
    """Kubernetes' kubelet posts a status that changed at once and an unchanged one (only
    heartbeat times newer) at the report frequency; the hollow kubelet's in-place compare
    (issue 37) keeps both."""
    clock = FakeClock()
    api, agent = _agent(clock)
    pressure: list[Obj] = []
    agent.extra_conditions = lambda: [dict(c) for c in pressure]
    task = asyncio.create_task(agent.run_status())
    try:
        await tick(clock)
        await tick(clock)
        await tick(clock)
        assert status_writes(api) == 1  # heartbeat times alone: not written before due
        pressure.append({"type": "DiskPressure", "status": "True", "reason": "Full",
                         "lastHeartbeatTime": "x", "lastTransitionTime": "t"})
        await tick(clock)
        assert status_writes(api) == 2  # a new condition: written at once
        await tick(clock)
        assert status_writes(api) == 2
        pressure[0]["reason"] = "StillFull"
        await tick(clock)
        assert status_writes(api) == 3  # a changed field of a condition
        pressure[0]["lastHeartbeatTime"] = "y"
        await tick(clock)
        assert status_writes(api) == 3  # a condition's heartbeat time alone
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_ps2_a_registering_kubelet_creates_its_node_with_its_status() -> None:
    """Kubernetes' kubelet creates its Node with the status already set (its initial
    node), so no client ever reads the node without one; CI saw a `kubectl get node`
    between Skiff's create and its first status write."""
    clock = FakeClock()
    api = FakeClient(clock=clock)
    agent = NodeAgent(api=api, clock=clock, node_name="node-1", labels={}, taints=[],
                      capacity={"cpu": "1"}, health_port=10248, lease_duration=40,
                      renew_interval=10, status_update_frequency=10,
                      status_report_frequency=300)
    await agent.register()
    assert len(api.calls("create", "nodes", failed=False)) == 1
    assert status_writes(api) == 0
    ready = {c["type"]: c["status"] for c in node(api)["status"]["conditions"]}["Ready"]
    assert ready == "True" and node(api)["status"]["capacity"] == {"cpu": "1"}
    # and, as Kubernetes' kubelet's first sync, the first check writes it through the
    # status subresource (whose managedFields entry the kubelet's status is known by)
    task = asyncio.create_task(agent.run_status())
    try:
        await tick(clock)
        assert status_writes(api) == 1
        await tick(clock)
        assert status_writes(api) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
