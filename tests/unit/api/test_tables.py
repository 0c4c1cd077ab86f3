"""What `skiff get pods` shows in STATUS (kubectl's rules; SPEC GT12, LC3)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.tables import age, node_status, pod_ready, pod_status
from skiff.api.testing import make_pod

NOW = 1_700_000_000.0


def _with_status(**status: Any) -> dict[str, Any]:
    pod = make_pod("p").node("n1").obj()
    pod["status"] = status
    return pod


@pytest.mark.parametrize(("pod", "expected"), [
    pytest.param(_with_status(phase="Pending"), "Pending", id="pending"),
    pytest.param(_with_status(phase="Running", containerStatuses=[
        {"name": "main", "ready": True, "state": {"running": {}}}]), "Running", id="running"),
    pytest.param(_with_status(phase="Running", containerStatuses=[
        {"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
        "CrashLoopBackOff", id="lc3-crashloop"),
    pytest.param(_with_status(phase="Failed", containerStatuses=[
        {"name": "main", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]),
        "Signal:9", id="killed"),
    pytest.param(_with_status(phase="Succeeded", containerStatuses=[
        {"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]),
        "Completed", id="completed"),
    pytest.param(_with_status(phase="Pending", conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
        "SchedulingGated", id="lc9-gated"),
])
def test_pod_status_column(pod: dict[str, Any], expected: str) -> None:
    assert pod_status(pod) == expected


def test_gt12_terminating_pod_shows_terminating() -> None:
    pod = _with_status(phase="Running", containerStatuses=[
        {"name": "main", "ready": True, "state": {"running": {}}}])
    pod["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    assert pod_status(pod) == "Terminating"


def test_init_container_progress() -> None:
    pod = make_pod("p").init_container("a", command=["true"]).init_container(
        "b", command=["true"]).obj()
    pod["status"] = {"phase": "Pending", "initContainerStatuses": [
        {"name": "a", "state": {"terminated": {"exitCode": 0}}},
        {"name": "b", "state": {"running": {}}}]}
    assert pod_status(pod) == "Init:1/2"


def test_ready_column_counts_ready_containers() -> None:
    pod = _with_status(containerStatuses=[{"name": "main", "ready": True}])
    assert pod_ready(pod) == "1/1"


@pytest.mark.parametrize(("conditions", "unschedulable", "expected"), [
    pytest.param([{"type": "Ready", "status": "True"}], False, "Ready", id="ready"),
    pytest.param([{"type": "Ready", "status": "Unknown"}], False, "Unknown", id="ps2-unknown"),
    pytest.param([{"type": "Ready", "status": "False"}], True, "NotReady,SchedulingDisabled",
                 id="cordoned"),
])
def test_node_status_column(conditions: list[dict[str, str]], unschedulable: bool,
                            expected: str) -> None:
    node = {"metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions}}
    assert node_status(node) == expected


@pytest.mark.parametrize(("seconds", "text"), [
    (5, "5s"), (125, "2m5s"), (600, "10m"), (3 * 3600 + 240, "3h4m"), (5 * 86400, "5d")])
def test_age_is_kubectls_human_duration(seconds: int, text: str) -> None:
    from skiff.clock import rfc3339
    assert age(rfc3339(NOW - seconds), now=NOW) == text
