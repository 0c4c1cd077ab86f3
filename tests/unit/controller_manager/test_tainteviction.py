"""SPEC PS2: when a pod's NoExecute tolerations run out (taint eviction timing), and the
taint eviction controller on a fake clock: a taint without `timeAdded` (what
`kubectl taint ... :NoExecute` writes) counts from when the controller first saw it."""

from __future__ import annotations

import copy

import pytest

from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.nodelifecycle import TaintEvictionController, eviction_time
from skiff.controller_manager.settings import ControllerManagerSettings

CLOCK = FakeClock()
NOW = CLOCK.now()
UNREACHABLE = "node.kubernetes.io/unreachable"


def taint(key: str = UNREACHABLE, effect: str = "NoExecute", *, added: float = NOW,
          value: str = "") -> Obj:
    t: Obj = {"key": key, "effect": effect, "timeAdded": rfc3339(added)}
    if value:
        t["value"] = value
    return t


def tol(key: str = UNREACHABLE, *, seconds: int | None = None, operator: str = "Exists",
        effect: str = "NoExecute", value: str = "") -> Obj:
    t: Obj = {"key": key, "operator": operator, "effect": effect}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    if value:
        t["value"] = value
    return t


@pytest.mark.parametrize(("taints", "tolerations", "expected"), [
    pytest.param([], [], None, id="no-taints"),
    pytest.param([taint(effect="NoSchedule")], [], None, id="noschedule-is-not-eviction"),
    pytest.param([taint()], [], NOW, id="untolerated-evicts-now"),
    pytest.param([taint()], [tol(seconds=300)], NOW + 300, id="default-300s"),
    pytest.param([taint(added=NOW - 100)], [tol(seconds=300)], NOW + 200,
                 id="counts-from-time-added"),
    pytest.param([taint(added=NOW - 400)], [tol(seconds=300)], NOW - 100, id="overdue"),
    pytest.param([taint()], [tol()], None, id="no-seconds-tolerates-forever"),
    pytest.param([taint()], [tol(seconds=300), tol(seconds=10)], NOW + 10,
                 id="shortest-matching-wins"),
    pytest.param([taint()], [tol(seconds=-5)], NOW, id="negative-means-now"),
    pytest.param([taint(), taint("other")], [tol(seconds=60)], NOW, id="one-untolerated"),
    pytest.param([taint(), taint("other", added=NOW - 50)],
                 [tol(seconds=60), tol("other", seconds=60)], NOW + 10,
                 id="earliest-over-taints"),
    pytest.param([taint()], [tol("", seconds=30)], NOW + 30, id="empty-key-exists-all"),
    pytest.param([taint("k", value="v")], [tol("k", operator="Equal", value="w")], NOW,
                 id="equal-wrong-value"),
    pytest.param([taint("k", value="v")], [tol("k", operator="Equal", value="v")], None,
                 id="equal-right-value"),
    pytest.param([taint()], [tol(effect="", seconds=5)], NOW + 5, id="empty-effect-all"),
    pytest.param([taint()], [tol(effect="NoSchedule")], NOW, id="other-effect"),
])
def test_ps2_eviction_time(taints: list[Obj], tolerations: list[Obj],
                           expected: float | None) -> None:
    assert eviction_time(taints=taints, tolerations=tolerations, first_seen={},
                         now=NOW) == expected


def test_ps2_taint_without_time_added_counts_from_now_when_first_seen() -> None:
    assert eviction_time(taints=[{"key": UNREACHABLE, "effect": "NoExecute"}],
                         tolerations=[tol(seconds=7)], first_seen={}, now=NOW) == NOW + 7


def test_ps2_taint_without_time_added_counts_from_when_first_seen() -> None:
    assert eviction_time(taints=[{"key": "key", "value": "value", "effect": "NoExecute"}],
                         tolerations=[tol("key", seconds=6)],
                         first_seen={("key", "NoExecute"): NOW - 4}, now=NOW) == NOW + 2


def test_ps2_time_added_wins_over_first_seen() -> None:
    assert eviction_time(taints=[taint(added=NOW - 100)], tolerations=[tol(seconds=300)],
                         first_seen={(UNREACHABLE, "NoExecute"): NOW}, now=NOW) == NOW + 200


# -- the controller ----------------------------------------------------------------------------


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeClient(clock=self.clock)
        self.ctl = TaintEvictionController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.clock))
        self.pod({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-p"},
            "spec": {"nodeName": "node-1", "tolerations": [
                tol("key", operator="Equal", value="value", seconds=6)]},
            "status": {"phase": "Running"}})
        self.taints([])

    def pod(self, pod: Obj) -> None:
        """The pod as the apiserver and the pod informer have it."""
        stored = self.api.add({"apiVersion": "v1", "kind": "Pod", **pod})[0]
        self.ctl.pods.store.put(copy.deepcopy(stored))

    @property
    def deleted(self) -> list[str]:
        return [f"{a.namespace}/{a.name}" for a in self.api.calls("delete", "pods")]

    @property
    def events(self) -> list[tuple[str, str]]:
        return [(a.object["reason"], a.object["message"])
                for a in self.api.calls("create", "events") if a.object]

    def taints(self, taints: list[Obj]) -> None:
        self.ctl.nodes.store.put({"metadata": {"name": "node-1"}, "spec": {"taints": taints}})

    async def sync(self) -> float | None:
        return await self.ctl.reconcile("ns/p")


KUBECTL_TAINT = {"key": "key", "value": "value", "effect": "NoExecute"}  # no timeAdded


async def test_ps2_toleration_seconds_run_out_for_a_taint_without_time_added() -> None:
    h = Harness()
    h.taints([KUBECTL_TAINT])
    assert await h.sync() == pytest.approx(6)
    h.clock.advance(4)
    assert await h.sync() == pytest.approx(2)  # the deadline stays where it was
    assert h.deleted == []
    h.clock.advance(2)
    assert await h.sync() is None
    assert h.deleted == ["ns/p"]
    assert ("TaintManagerEviction", "Marking for deletion Pod ns/p") in h.events


async def test_ps2_removed_taint_cancels_and_a_new_one_starts_over() -> None:
    h = Harness()
    h.taints([KUBECTL_TAINT])
    assert await h.sync() == pytest.approx(6)
    h.clock.advance(5)
    h.taints([])
    assert await h.sync() is None
    assert ("TaintManagerEviction", "Cancelling deletion of Pod ns/p") in h.events
    h.clock.advance(5)
    h.taints([KUBECTL_TAINT])
    assert await h.sync() == pytest.approx(6)
    assert h.deleted == []


async def test_ps2_first_seen_is_per_taint() -> None:
    h = Harness()
    h.pod({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-p"},
        "spec": {"nodeName": "node-1", "tolerations": [tol("key", seconds=6),
                                                       tol("other", seconds=10)]}})
    h.taints([KUBECTL_TAINT])
    assert await h.sync() == pytest.approx(6)
    h.clock.advance(3)
    h.taints([{"key": "other", "effect": "NoExecute"}])  # key removed, other added
    assert await h.sync() == pytest.approx(10)
    h.clock.advance(3)
    assert await h.sync() == pytest.approx(7)


async def test_ps2_deleted_pod_is_forgotten() -> None:
    h = Harness()
    h.taints([KUBECTL_TAINT])
    await h.sync()
    pod = h.ctl.pods.store.get("ns/p")
    assert pod is not None
    h.ctl.pods.store.remove(pod)
    assert await h.sync() is None
    assert h.ctl.first_seen == {}
