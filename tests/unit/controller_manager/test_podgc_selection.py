"""SPEC PS3: which pods each PodGC rule picks, as tables."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from skiff.controller_manager.podgc.selection import (
    Quarantine,
    missing_nodes,
    select_orphaned,
    select_out_of_service,
    select_terminated,
    select_unscheduled_terminating,
)


def _names(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def _done(name: str, created: str, phase: str = "Succeeded") -> Obj:
    return make_pod(name).node("n1").phase(phase).creation_timestamp(created).obj()


TERMINATED = [
    _done("c", "2024-01-01T00:00:03Z"),
    _done("a", "2024-01-01T00:00:01Z", "Failed"),
    _done("b", "2024-01-01T00:00:02Z"),
    make_pod("running").node("n1").phase("Running").creation_timestamp(
        "2024-01-01T00:00:00Z").obj(),
]


@pytest.mark.parametrize(("threshold", "expected"), [
    pytest.param(2, ["a"], id="one-over-oldest-goes"),
    pytest.param(1, ["a", "b"], id="two-over-oldest-first"),
    pytest.param(3, [], id="at-threshold-nothing"),
    pytest.param(0, [], id="zero-disables"),
])
def test_ps3_gc_terminated_oldest_first(threshold: int, expected: list[str]) -> None:
    assert _names(select_terminated(TERMINATED, threshold=threshold)) == expected


def test_ps3_gc_terminated_ties_break_by_name() -> None:
    pods = [_done("y", "2024-01-01T00:00:01Z"), _done("x", "2024-01-01T00:00:01Z")]
    assert _names(select_terminated(pods, threshold=1)) == ["x"]


def test_ps3_orphans_wait_out_the_quarantine_per_node() -> None:
    pods = [make_pod("p1").node("gone").obj(), make_pod("p2").node("here").obj(),
            make_pod("p3").obj()]
    missing = missing_nodes(pods, {"here"})
    assert missing == {"gone"}
    quarantine = Quarantine(period=40)
    quarantine.update(missing, now=100)
    assert quarantine.due(now=139) == set()
    assert quarantine.next_due_in(now=110) == 30
    quarantine.update(missing, now=130)  # still missing: the first sighting counts
    assert quarantine.due(now=140) == {"gone"}
    quarantine.update(set(), now=141)  # the node came back: start over
    assert quarantine.due(now=500) == set()


def test_ps3_orphaned_selects_pods_of_confirmed_deleted_nodes_only() -> None:
    pods = [make_pod("p1").node("gone").obj(), make_pod("p2").node("unsure").obj()]
    assert _names(select_orphaned(pods, deleted_nodes={"gone"})) == ["p1"]


@pytest.mark.parametrize(("pod", "selected"), [
    pytest.param(make_pod("p").terminating().obj(), True, id="terminating-unscheduled"),
    pytest.param(make_pod("p").obj(), False, id="not-terminating"),
    pytest.param(make_pod("p").node("n1").terminating().obj(), False, id="scheduled"),
    pytest.param(make_pod("p").terminating().phase("Failed").obj(), True,
                 id="terminal-too-as-in-kubernetes"),
])
def test_ps3_gc_unscheduled_terminating(pod: Obj, selected: bool) -> None:
    assert bool(select_unscheduled_terminating([pod])) is selected


OOS = "node.kubernetes.io/out-of-service"


@pytest.mark.parametrize(("node", "pod", "selected"), [
    pytest.param(make_node("n1").condition("Ready", "False").taint(OOS, "NoExecute").obj(),
                 make_pod("p").node("n1").terminating().obj(), True, id="notready-tainted"),
    pytest.param(make_node("n1").condition("Ready", "Unknown").taint(OOS, "NoSchedule").obj(),
                 make_pod("p").node("n1").terminating().obj(), True, id="unknown-tainted"),
    pytest.param(make_node("n1").condition("Ready", "True").taint(OOS, "NoExecute").obj(),
                 make_pod("p").node("n1").terminating().obj(), False, id="ready-node"),
    pytest.param(make_node("n1").condition("Ready", "False").obj(),
                 make_pod("p").node("n1").terminating().obj(), False, id="no-taint"),
    pytest.param(make_node("n1").condition("Ready", "False").taint(OOS, "NoExecute").obj(),
                 make_pod("p").node("n1").obj(), False, id="pod-not-terminating"),
    pytest.param(make_node("n1").condition("Ready", "False").taint(OOS, "NoExecute").obj(),
                 make_pod("p").node("n2").terminating().obj(), False, id="other-node"),
    pytest.param(make_node("n1").condition("Ready", "False").taint(OOS, "NoExecute").obj(),
                 make_pod("p").node("n1").terminating().phase("Succeeded").obj(), True,
                 id="terminal-too-as-in-kubernetes"),
])
def test_ps3_gc_out_of_service(node: Obj, pod: Obj, selected: bool) -> None:
    assert bool(select_out_of_service([pod], [node])) is selected


def _evicted(name: str, created: str) -> Obj:
    pod = _done(name, created, "Failed")
    pod["status"]["reason"] = "Evicted"
    return pod


def test_ps3_gc_terminated_evicted_pods_go_first() -> None:
    """`byEvictionAndCreationTimestamp`: kubelet-evicted pods before older ones."""
    pods = [_done("old", "2024-01-01T00:00:01Z"), _evicted("new-evicted", "2024-01-01T00:00:09Z"),
            _done("older", "2024-01-01T00:00:00Z", "Failed"),
            _evicted("evicted", "2024-01-01T00:00:05Z")]
    assert _names(select_terminated(pods, threshold=1)) == ["evicted", "new-evicted", "older"]


def test_ps3_gc_out_of_service_evicted_pods_go_first() -> None:
    node = make_node("n1").condition("Ready", "False").taint(OOS, "NoExecute").obj()
    plain = make_pod("a").node("n1").terminating().creation_timestamp(
        "2024-01-01T00:00:00Z").obj()
    evicted = make_pod("b").node("n1").terminating().phase("Failed").creation_timestamp(
        "2024-01-01T00:00:09Z").obj()
    evicted["status"]["reason"] = "Evicted"
    assert _names(select_out_of_service([plain, evicted], [node])) == ["b", "a"]
