"""Pod phase (LC1, GT10), readiness gates (LC6), eviction ranking and thresholds (GT11),
and the kubelet's flag formats."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skiff.api.testing import make_pod
from skiff.kubelet.eviction import PodUsage, Threshold, parse_thresholds, rank_for_eviction
from skiff.kubelet.records import APP, ContainerRecord
from skiff.kubelet.runtime import ContainerHandle
from skiff.kubelet.settings import parse_labels, parse_taints
from skiff.kubelet.status import pod_phase, ready_conditions
from skiff.settings import SettingsError


def _record(*, running: bool = False, exit_code: int | None = None,
            attempts: int = 1) -> ContainerRecord:
    loop = asyncio.new_event_loop()
    exited: asyncio.Future[int | None] = loop.create_future()
    if not running:
        exited.set_result(exit_code)
    handle = ContainerHandle(id="x", pid=1, pgid=1, start_ticks=0, started_at=0.0,
                             exited=exited)
    loop.close()
    return ContainerRecord(spec={"name": "c"}, kind=APP, handle=handle if attempts else None,
                           attempts=attempts, exit_code=exit_code, post_start_done=True,
                           ready=running,
                           finished_at=None if running else 0.0)  # as the exit callback


@pytest.mark.parametrize(("records", "policy", "terminating", "previous", "expected"), [
    pytest.param([_record(attempts=0)], "Always", False, "Pending", "Pending", id="not-started"),
    pytest.param([_record(running=True)], "Always", False, "Pending", "Running", id="running"),
    pytest.param([_record(exit_code=1)], "Always", False, "Running", "Running",
                 id="always-restarts"),
    pytest.param([_record(exit_code=0)], "Never", False, "Running", "Succeeded",
                 id="never-success"),
    pytest.param([_record(exit_code=2)], "Never", False, "Running", "Failed", id="never-fail"),
    pytest.param([_record(exit_code=2)], "OnFailure", False, "Running", "Running",
                 id="onfailure-restarts"),
    pytest.param([_record(exit_code=143)], "Always", True, "Running", "Failed",
                 id="gt10-deleted-killed-by-sigterm"),
    pytest.param([_record(exit_code=0)], "Always", True, "Running", "Succeeded",
                 id="gt10-deleted-exited-0"),
    pytest.param([_record(attempts=0)], "Always", False, "Running", "Running",
                 id="lc1-never-back-to-pending"),
    pytest.param([_record(running=True)], "Always", False, "Failed", "Failed",
                 id="lc1-terminal-is-final"),
])
def test_lc1_pod_phase(records: list[ContainerRecord], policy: str, terminating: bool,
                       previous: str, expected: str) -> None:
    assert pod_phase(records, restart_policy=policy, terminating=terminating,
                     previous=previous) == expected


@pytest.mark.parametrize(("gate_status", "expected"), [
    pytest.param(None, "False", id="missing-gate-condition-is-false"),
    pytest.param("False", "False", id="false-gate"),
    pytest.param("True", "True", id="true-gate"),
])
def test_lc6_readiness_gates(gate_status: str | None, expected: str) -> None:
    builder = make_pod("p").container("c").readiness_gate("example.com/g")
    if gate_status is not None:
        builder.condition("example.com/g", gate_status)
    pod: dict[str, Any] = builder.obj()
    conds = {c["type"]: c["status"] for c in ready_conditions(
        [_record(running=True)], pod, sandbox_ready=True)}
    assert conds["ContainersReady"] == "True"
    assert conds["Ready"] == expected


@pytest.mark.parametrize(("pods", "expected"), [
    pytest.param([PodUsage("under", 50, 100, 0), PodUsage("over", 150, 100, 1000)],
                 ["over", "under"], id="usage-above-requests-first"),
    pytest.param([PodUsage("high", 200, 100, 100), PodUsage("low", 200, 100, 0)],
                 ["low", "high"], id="then-lower-priority"),
    pytest.param([PodUsage("a", 150, 100, 0), PodUsage("b", 400, 100, 0)],
                 ["b", "a"], id="then-more-above-requests"),
])
def test_gt11_eviction_ranking(pods: list[PodUsage], expected: list[str]) -> None:
    assert [p.key for p in rank_for_eviction(pods)] == expected


def test_gt11_threshold_formats() -> None:
    assert parse_thresholds("memory.available<100Mi,nodefs.available<10%", flag="--x") == [
        Threshold("memory.available", quantity=100 * 1024**2),
        Threshold("nodefs.available", percentage=10.0)]
    with pytest.raises(SettingsError, match="--eviction-hard"):
        parse_thresholds("memory.available>1", flag="--eviction-hard")


def test_node_labels_and_taints_flags() -> None:
    assert parse_labels("zone=a,disk=ssd") == {"zone": "a", "disk": "ssd"}
    assert parse_taints("dedicated=gpu:NoSchedule,spot:NoExecute") == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "spot", "effect": "NoExecute"}]
    with pytest.raises(SettingsError, match="--register-with-taints"):
        parse_taints("bad:Sometimes")
