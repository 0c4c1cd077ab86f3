"""Kubelet rules checked as pure functions against Kubernetes 1.32 (SPEC GT11, LC1/LC4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiff.kubelet.eviction import PodUsage, is_critical_pod, rank_for_eviction
from skiff.kubelet.records import APP, SIDECAR, ContainerRecord
from skiff.kubelet.runtime import ContainerConfig
from skiff.kubelet.runtime.fake import FakeRuntime
from skiff.kubelet.status import pod_phase


def _pod(*, annotations: dict[str, str] | None = None,
         priority: int | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p", "annotations": annotations or {}},
                           "spec": {"containers": [{"name": "c"}]}}
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


@pytest.mark.parametrize(("pod", "critical"), [
    pytest.param(_pod(), False, id="ordinary"),
    pytest.param(_pod(annotations={"kubernetes.io/config.source": "file"}), True,
                 id="static-pod"),
    pytest.param(_pod(annotations={"kubernetes.io/config.source": "api"}), False,
                 id="api-source-is-not-static"),
    pytest.param(_pod(annotations={"kubernetes.io/config.mirror": "abc"}), True,
                 id="mirror-pod"),
    pytest.param(_pod(priority=2_000_000_000), True, id="system-cluster-critical"),
    pytest.param(_pod(priority=2_000_001_000), True, id="system-node-critical"),
    pytest.param(_pod(priority=1_999_999_999), False, id="just-below-critical"),
])
def test_gt11_critical_pods_are_never_evicted_for_node_pressure(
        pod: dict[str, Any], critical: bool) -> None:
    assert is_critical_pod(pod) is critical


def test_gt11_ranking_keeps_critical_pods_out_of_the_candidates() -> None:
    usage = [PodUsage("critical", usage=900, requests=0, priority=2_000_000_000,
                      critical=True),
             PodUsage("small", usage=10, requests=0, priority=0)]
    candidates = [u for u in usage if not u.critical]
    assert [u.key for u in rank_for_eviction(candidates)] == ["small"]


async def _running(runtime: FakeRuntime, spec: dict[str, Any], kind: str, *,
                   started: bool) -> ContainerRecord:
    r = ContainerRecord(spec=spec, kind=kind)
    r.handle = await runtime.start(ContainerConfig(
        pod_uid="u", namespace="ns", pod_name="p", name=spec["name"], command=["x"],
        env={}, working_dir=Path("."), log_path=Path("log")))
    r.attempts = 1
    r.started = started
    r.post_start_done = True
    return r


async def test_lc1_running_sidecar_with_app_containers_not_started_is_pending() -> None:
    """Kubernetes' getPhase: an app container waiting with no earlier termination counts
    as `waiting`, and any waiting container makes the pod Pending, even while a sidecar
    runs (the issue suspected Running; Kubernetes 1.32 says Pending)."""
    runtime = FakeRuntime()
    sidecar = await _running(runtime, {"name": "side", "restartPolicy": "Always"}, SIDECAR,
                             started=True)
    app = ContainerRecord(spec={"name": "app"}, kind=APP)
    assert pod_phase([sidecar, app], restart_policy="Always", terminating=False) == "Pending"


async def test_lc1_running_sidecar_and_app_in_crash_loop_is_running() -> None:
    """getPhase: a waiting container with a lastState termination counts as stopped, and a
    running sidecar makes `running > 0`: Running."""
    runtime = FakeRuntime()
    sidecar = await _running(runtime, {"name": "side", "restartPolicy": "Always"}, SIDECAR,
                             started=True)
    app = ContainerRecord(spec={"name": "app"}, kind=APP, attempts=1, exit_code=1,
                          last_state={"terminated": {"exitCode": 1}},
                          state={"waiting": {"reason": "CrashLoopBackOff"}})
    assert pod_phase([sidecar, app], restart_policy="Always", terminating=False) == "Running"
