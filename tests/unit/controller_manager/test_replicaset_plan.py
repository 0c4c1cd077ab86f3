"""SPEC PS4: the ReplicaSet counts only active pods and deletes the least valuable first."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import make_pod
from skiff.controller_manager.replicaset.plan import (
    active_pods,
    pods_to_delete,
    replica_diff,
    slow_start_batches,
)

Obj = dict[str, Any]


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
    assert pods_to_delete(pods, 1)[0]["metadata"]["name"] == first
