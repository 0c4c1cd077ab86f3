"""The fence agent's state machine (SPEC FN1–FN3) against a fake agent and the in-memory API."""

from __future__ import annotations

import asyncio

import pytest

from skiff.api.types import Obj
from skiff.client import EventRecorder
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.fence_agent import FINALIZER, FenceController, FenceError, FenceStatus


def phases(api: FakeClient) -> list[str]:
    """The phases the controller wrote, in order."""
    return [str(a.object["status"]["phase"]) for a in api.calls("update_status", "fences")
            if a.object is not None]


def reasons(api: FakeClient) -> list[str]:
    """The reasons of the Events the controller recorded, in order."""
    return [str(a.object["reason"]) for a in api.actions
            if a.resource == "events" and a.object is not None]


def stored(api: FakeClient, name: str) -> Obj:
    fence = api.stored("fences", name)
    assert fence is not None, f"fence {name} is gone"
    return fence


class FakeAgent:
    def __init__(self, *, fails: bool = False, confirms: bool = True) -> None:
        self.fails = fails
        self.confirms = confirms
        self.calls: list[str] = []
        self.down = False

    async def fence(self, node: str) -> str:
        self.calls.append(f"fence {node}")
        if self.fails:
            raise FenceError(f"cannot reach the BMC of {node}")
        self.down = True
        return f"powered off {node}"

    async def unfence(self, node: str) -> str:
        self.calls.append(f"unfence {node}")
        self.down = False
        return f"powered on {node}"

    async def status(self, node: str) -> FenceStatus:
        self.calls.append(f"status {node}")
        return FenceStatus(fenced=self.down and self.confirms, message="checked")


def make_fence(node: str, *, agent: str = "power", phase: str = "Pending",
               finalizers: tuple[str, ...] = (FINALIZER,)) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Fence",
            "metadata": {"name": node, "uid": f"uid-{node}", "finalizers": list(finalizers)},
            "spec": {"nodeName": node, "agent": agent, "reason": "test"},
            "status": {"phase": phase}}


def controller(api: FakeClient, agent: FakeAgent) -> FenceController:
    clock = FakeClock()
    return FenceController(api=api, agents={"power": agent},
                           recorder=EventRecorder(api, component="fence-agent", clock=clock),
                           clock=clock)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.parametrize(("agent", "start", "expected_phases", "final", "events"), [
    pytest.param(FakeAgent(), "Pending", ["Fencing", "Fenced"], "Fenced",
                 ["Fencing", "Fenced"], id="pending-to-fenced"),
    pytest.param(FakeAgent(), "Fencing", ["Fenced"], "Fenced", ["Fenced"],
                 id="crashed-mid-fence-fences-again"),
    pytest.param(FakeAgent(fails=True), "Pending", ["Fencing", "Failed"], "Failed",
                 ["Fencing", "FenceFailed"], id="agent-error-fails"),
    pytest.param(FakeAgent(confirms=False), "Pending", ["Fencing", "Failed"], "Failed",
                 ["Fencing", "FenceFailed"], id="unconfirmed-fails"),
    pytest.param(FakeAgent(), "Failed", [], "Failed", [], id="failed-stays-failed"),
])
async def test_fence_state_machine(agent: FakeAgent, start: str, expected_phases: list[str],
                                   final: str, events: list[str]) -> None:
    api = FakeClient()
    api.add(make_fence("node-1", phase=start))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    await settle()
    assert phases(api) == expected_phases
    fence = stored(api, "node-1")
    assert fence["status"]["phase"] == final
    assert ("confirmedAt" in fence["status"]) == (final == "Fenced")
    assert reasons(api) == events
    if final == "Failed" and agent.fails:
        assert "cannot reach the BMC of node-1" in fence["status"]["message"]


async def test_fenced_is_only_reported_after_the_agent_confirms() -> None:
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    assert agent.calls == ["fence node-1", "status node-1"]


async def test_unfence_runs_the_agent_then_removes_the_finalizer() -> None:
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    await api.delete("fences", "node-1")
    await fc.reconcile("node-1")
    await settle()
    assert phases(api)[-1] == "Unfencing"
    assert agent.calls[-1] == "unfence node-1"
    assert api.stored("fences", "node-1") is None
    assert reasons(api)[-1] == "Unfenced"


async def test_a_failed_unfence_keeps_the_finalizer_and_retries() -> None:
    class Stuck(FakeAgent):
        async def unfence(self, node: str) -> str:
            raise FenceError("kubelet did not come back")

    api, agent = FakeClient(), Stuck()
    api.add(make_fence("node-1"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    await api.delete("fences", "node-1")
    with pytest.raises(FenceError):
        await fc.reconcile("node-1")
    await settle()
    fence = stored(api, "node-1")
    assert fence["metadata"]["finalizers"] == [FINALIZER]
    assert "kubelet did not come back" in fence["status"]["message"]


async def test_missing_finalizer_is_added_before_fencing() -> None:
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1", finalizers=()))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    await settle()
    assert stored(api, "node-1")["metadata"]["finalizers"] == [FINALIZER]
    assert stored(api, "node-1")["status"]["phase"] == "Fenced"


async def test_a_fenced_node_that_comes_back_is_fenced_again() -> None:
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    agent.down = False  # somebody started it again
    await fc.reconcile("node-1")
    await settle()
    assert agent.down
    assert "FenceBroken" in reasons(api)
    assert stored(api, "node-1")["status"]["phase"] == "Fenced"


async def test_unknown_agent_fails_with_a_clear_message() -> None:
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1", agent="storage"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    fence = stored(api, "node-1")
    assert fence["status"]["phase"] == "Failed"
    assert "no 'storage' agent" in fence["status"]["message"]


async def test_fence_and_unfence_log_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """`extra={"message": ...}` made every fence/unfence log line raise
    KeyError ("Attempt to overwrite 'message' in LogRecord") once INFO was enabled."""
    caplog.set_level("INFO", logger="skiff.fence_agent")
    api, agent = FakeClient(), FakeAgent()
    api.add(make_fence("node-1"))
    fc = controller(api, agent)
    await fc.reconcile("node-1")
    await api.delete("fences", "node-1")
    await fc.reconcile("node-1")
    await settle()
    logged = {r.getMessage(): r for r in caplog.records}
    assert getattr(logged["node fenced"], "detail", None) == "powered off node-1"
    assert getattr(logged["node unfenced"], "detail", None) == "powered on node-1"
    assert not [r for r in caplog.records if r.exc_info or r.levelname == "ERROR"]
