"""SPEC PS4: the ReplicaSet counts only active pods and deletes the least valuable first."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.clock import parse_rfc3339
from skiff.controller_manager.podutil import available_in, is_available
from skiff.controller_manager.replicaset.plan import (
    active_pods,
    pods_to_delete,
    replica_diff,
    slow_start_batches,
)


def test_ps4_terminating_pods_do_not_count() -> None:
    pods = [make_pod("a").phase("Running").obj(),
            make_pod("b").phase("Running").terminating().obj(),
            make_pod("c").phase("Succeeded").obj()]
    active = active_pods(pods)
    assert [p["metadata"]["name"] for p in active] == ["a"]
    assert replica_diff(replicas=2, active=len(active)) == 1


@pytest.mark.parametrize(("replicas", "active", "diff"), [
    pytest.param(3, 1, 2, id="create"),
    pytest.param(1, 3, -2, id="delete"),
    pytest.param(2000, 0, 500, id="burst-cap"),
    pytest.param(2, 2, 0, id="steady"),
])
def test_replica_diff(replicas: int, active: int, diff: int) -> None:
    assert replica_diff(replicas=replicas, active=active) == diff


@pytest.mark.parametrize(("count", "batches"), [
    pytest.param(1, [1], id="one"), pytest.param(7, [1, 2, 4], id="seven"),
    pytest.param(10, [1, 2, 4, 3], id="ten"), pytest.param(0, [], id="zero"),
])
def test_slow_start_batches(count: int, batches: list[int]) -> None:
    assert slow_start_batches(count) == batches


def _ready(name: str, *, since: str = "2024-01-01T00:00:00Z",
           created: str = "2024-01-01T00:00:00Z") -> Obj:
    pod = make_pod(name).node("n1").phase("Running").creation_timestamp(created).obj()
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                    "lastTransitionTime": since}]
    return pod


@pytest.mark.parametrize(("pods", "first"), [
    pytest.param([_ready("a"), make_pod("b").phase("Pending").obj()], "b",
                 id="unscheduled-first"),
    pytest.param([_ready("a"), make_pod("b").node("n1").phase("Pending").obj()], "b",
                 id="pending-before-running"),
    pytest.param([_ready("a"), make_pod("b").node("n1").phase("Running").obj()], "b",
                 id="not-ready-first"),
    pytest.param([_ready("a", since="2024-01-01T00:00:00Z"),
                  _ready("b", since="2024-01-02T00:00:00Z")], "b",
                 id="ready-shorter-first"),
    pytest.param([_ready("a", created="2024-01-01T00:00:00Z"),
                  _ready("b", created="2024-01-03T00:00:00Z")], "b", id="newer-first"),
])
def test_ps4_scale_down_order(pods: list[Obj], first: str) -> None:
    assert pods_to_delete(pods, 1, now=NOW)[0]["metadata"]["name"] == first


NOW = parse_rfc3339("2024-01-03T01:00:00Z")


def _on(name: str, node: str, *, uid: str = "", cost: str | None = None,
        since: str = "2024-01-01T00:00:00Z", created: str = "2024-01-01T00:00:00Z",
        restarts: tuple[int, ...] = ()) -> Obj:
    pod = _ready(name, since=since, created=created)
    pod["spec"]["nodeName"] = node
    pod["metadata"]["uid"] = uid or f"uid-{name}"
    if cost is not None:
        pod["metadata"].setdefault("annotations", {})[
            "controller.kubernetes.io/pod-deletion-cost"] = cost
    pod["status"]["containerStatuses"] = [{"name": f"c{i}", "restartCount": n}
                                          for i, n in enumerate(restarts)]
    return pod


@pytest.mark.parametrize(("pods", "order"), [
    pytest.param([_on("a", "n1", cost="10"), _on("b", "n2", cost="-5"), _on("c", "n3")],
                 ["b", "c", "a"], id="pod-deletion-cost-lowest-first"),
    pytest.param([_on("a", "n1", cost="nonsense"), _on("b", "n2", cost="1")],
                 ["a", "b"], id="invalid-cost-is-zero"),
    pytest.param([_on("a", "n1"), _on("b", "n2"), _on("c", "n2")], ["b", "c", "a"],
                 id="doubled-up-node-first"),
    pytest.param([_on("a", "n1", cost="1"), _on("b", "n2"), _on("c", "n2")],
                 ["b", "c", "a"], id="cost-before-colocation"),
    pytest.param([_on("a", "n1", since="2024-01-03T00:00:00Z", uid="2"),
                  _on("b", "n2", since="2024-01-03T00:10:00Z", uid="1")], ["b", "a"],
                 id="ready-50-and-60-min-same-bucket-uid-decides"),
    pytest.param([_on("a", "n1", since="2024-01-03T00:00:00Z", uid="1"),
                  _on("b", "n2", since="2024-01-03T00:10:00Z", uid="2")], ["a", "b"],
                 id="same-bucket-lower-uid-first"),
    pytest.param([_on("a", "n1", since="2024-01-01T00:00:00Z", uid="1"),
                  _on("b", "n2", since="2024-01-03T00:00:00Z", uid="2")], ["b", "a"],
                 id="ready-less-time-bucket-first"),
    pytest.param([_on("a", "n1", restarts=(1, 1, 1)), _on("b", "n2", restarts=(2,))],
                 ["b", "a"], id="max-not-sum-of-restarts"),
    pytest.param([_on("a", "n1", created="2024-01-01T00:00:00Z", uid="1"),
                  _on("b", "n2", created="2024-01-03T00:30:00Z", uid="2")], ["b", "a"],
                 id="newer-bucket-first"),
    pytest.param([_on("a", "n1", created="2024-01-02T01:00:00Z", uid="1"),
                  _on("b", "n2", created="2024-01-02T02:00:00Z", uid="2")], ["a", "b"],
                 id="created-same-bucket-uid-decides"),
])
def test_ps4_active_pods_with_ranks(pods: list[Obj], order: list[str]) -> None:
    """Kubernetes 1.32 `ActivePodsWithRanks` with PodDeletionCost and
    LogarithmicScaleDown (both on by default)."""
    chosen = pods_to_delete(pods, len(pods) - 1, now=NOW)
    assert [p["metadata"]["name"] for p in chosen] == order[:-1]


def test_ps4_available_only_after_min_ready_seconds() -> None:
    pod = _ready("a", since="2024-01-03T00:59:50Z")  # ready 10 s before NOW
    assert is_available(pod, min_ready_seconds=0, now=NOW)
    assert is_available(pod, min_ready_seconds=10, now=NOW)
    assert not is_available(pod, min_ready_seconds=11, now=NOW)
    assert available_in([pod], min_ready_seconds=15, now=NOW) == 5
    assert available_in([pod], min_ready_seconds=5, now=NOW) is None
    not_ready = make_pod("b").node("n1").phase("Running").obj()
    assert not is_available(not_ready, min_ready_seconds=0, now=NOW)
