"""The fence agent's state machine (SPEC FN1–FN3) against a fake agent and a fake API."""

from __future__ import annotations

import copy
from typing import cast

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient, EventRecorder
from skiff.clock import FakeClock
from skiff.fence_agent import FINALIZER, FenceController, FenceError, FenceStatus


class FakeApi:
    """get / update / update_status of fences, finalizers honoured on delete."""

    def __init__(self) -> None:
        self.fences: dict[str, Obj] = {}
        self.rv = 0
        self.phases: list[str] = []

    def put(self, fence: Obj) -> Obj:
        self.rv += 1
        fence = copy.deepcopy(fence)
        fence["metadata"]["resourceVersion"] = str(self.rv)
        meta = fence["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.fences.pop(meta["name"], None)
        else:
            self.fences[meta["name"]] = fence
        return copy.deepcopy(fence)

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        if name not in self.fences:
            raise ApiError(Reason.NOT_FOUND, f'fences "{name}" not found')
        return copy.deepcopy(self.fences[name])

    async def update(self, obj: Obj) -> Obj:
        current = self.fences[obj["metadata"]["name"]]
        if current["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ApiError(Reason.CONFLICT, "modified")
        new = copy.deepcopy(obj)
        new["status"] = current.get("status", {})
        return self.put(new)

    async def update_status(self, obj: Obj) -> Obj:
        current = copy.deepcopy(self.fences[obj["metadata"]["name"]])
        current["status"] = copy.deepcopy(obj["status"])
        self.phases.append(current["status"]["phase"])
        return self.put(current)

    def delete(self, name: str) -> None:
        fence = copy.deepcopy(self.fences[name])
        fence["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        self.put(fence)


class FakeRecorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    async def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.reasons.append(reason)


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


def controller(api: FakeApi, agent: FakeAgent) -> tuple[FenceController, FakeRecorder]:
    recorder = FakeRecorder()
    return FenceController(api=cast(ApiClient, api), agents={"power": agent},
                           recorder=cast(EventRecorder, recorder), clock=FakeClock()), recorder


async def settle() -> None:
    import asyncio
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.parametrize(("agent", "start", "phases", "final", "events"), [
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
async def test_fence_state_machine(agent: FakeAgent, start: str, phases: list[str],
                                   final: str, events: list[str]) -> None:
    api = FakeApi()
    api.put(make_fence("node-1", phase=start))
    fc, recorder = controller(api, agent)
    await fc.reconcile("node-1")
    await settle()
    assert api.phases == phases
    fence = api.fences["node-1"]
    assert fence["status"]["phase"] == final
    assert ("confirmedAt" in fence["status"]) == (final == "Fenced")
    assert recorder.reasons == events
    if final == "Failed" and agent.fails:
        assert "cannot reach the BMC of node-1" in fence["status"]["message"]


async def test_fenced_is_only_reported_after_the_agent_confirms() -> None:
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1"))
    fc, _ = controller(api, agent)
    await fc.reconcile("node-1")
    assert agent.calls == ["fence node-1", "status node-1"]


async def test_unfence_runs_the_agent_then_removes_the_finalizer() -> None:
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1"))
    fc, recorder = controller(api, agent)
    await fc.reconcile("node-1")
    api.delete("node-1")
    await fc.reconcile("node-1")
    await settle()
    assert api.phases[-1] == "Unfencing"
    assert agent.calls[-1] == "unfence node-1"
    assert "node-1" not in api.fences
    assert recorder.reasons[-1] == "Unfenced"


async def test_a_failed_unfence_keeps_the_finalizer_and_retries() -> None:
    class Stuck(FakeAgent):
        async def unfence(self, node: str) -> str:
            raise FenceError("kubelet did not come back")

    api, agent = FakeApi(), Stuck()
    api.put(make_fence("node-1"))
    fc, _ = controller(api, agent)
    await fc.reconcile("node-1")
    api.delete("node-1")
    with pytest.raises(FenceError):
        await fc.reconcile("node-1")
    await settle()
    fence = api.fences["node-1"]
    assert fence["metadata"]["finalizers"] == [FINALIZER]
    assert "kubelet did not come back" in fence["status"]["message"]


async def test_missing_finalizer_is_added_before_fencing() -> None:
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1", finalizers=()))
    fc, _ = controller(api, agent)
    await fc.reconcile("node-1")
    await settle()
    assert api.fences["node-1"]["metadata"]["finalizers"] == [FINALIZER]
    assert api.fences["node-1"]["status"]["phase"] == "Fenced"


async def test_a_fenced_node_that_comes_back_is_fenced_again() -> None:
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1"))
    fc, recorder = controller(api, agent)
    await fc.reconcile("node-1")
    agent.down = False  # somebody started it again
    await fc.reconcile("node-1")
    await settle()
    assert agent.down
    assert "FenceBroken" in recorder.reasons
    assert api.fences["node-1"]["status"]["phase"] == "Fenced"


async def test_unknown_agent_fails_with_a_clear_message() -> None:
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1", agent="storage"))
    fc, _ = controller(api, agent)
    await fc.reconcile("node-1")
    fence = api.fences["node-1"]
    assert fence["status"]["phase"] == "Failed"
    assert "no 'storage' agent" in fence["status"]["message"]


async def test_defect8_fence_and_unfence_log_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 10 defect 8: `extra={"message": ...}` made every fence/unfence log line raise
    KeyError ("Attempt to overwrite 'message' in LogRecord") once INFO was enabled."""
    caplog.set_level("INFO", logger="skiff.fence_agent")
    api, agent = FakeApi(), FakeAgent()
    api.put(make_fence("node-1"))
    fc, _ = controller(api, agent)
    await fc.reconcile("node-1")
    api.delete("node-1")
    await fc.reconcile("node-1")
    await settle()
    logged = {r.getMessage(): r for r in caplog.records}
    assert getattr(logged["node fenced"], "detail", None) == "powered off node-1"
    assert getattr(logged["node unfenced"], "detail", None) == "powered on node-1"
    assert not [r for r in caplog.records if r.exc_info or r.levelname == "ERROR"]
