"""The status a pod worker writes (GT10, GT11, LC1): pod_status.generate_pod_status, a pure
function of the pod, its container records and what the worker knows."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.kubelet.admission import Rejection
from skiff.kubelet.pod_status import Eviction, generate_pod_status
from skiff.kubelet.records import pod_records


def _pod() -> Obj:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
            "spec": {"containers": [{"name": "c", "command": ["sleep", "1"]}]},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "PodScheduled", "status": "True"}]}}


def _status(pod: Obj, *, rejection: Rejection | None = None, phase_seen: str = "Pending",
            terminal: bool = False, eviction: Eviction | None = None,
            pod_ip: str | None = None) -> Obj:
    return generate_pod_status(
        pod, records=pod_records(pod["spec"]), rejection=rejection, phase_seen=phase_seen,
        terminal=terminal, init_failed=False, eviction=eviction,
        start_time="2026-01-01T00:00:00Z", pod_ip=pod_ip, now=0.0)


def test_a_rejected_pod_fails_with_why_and_keeps_the_schedulers_condition() -> None:
    status = _status(_pod(), rejection=Rejection(reason="OutOfcpu", message="no cpu"))
    assert status["phase"] == "Failed"
    assert (status["reason"], status["message"]) == ("OutOfcpu", "Pod was rejected: no cpu")
    assert status["conditions"] == [{"type": "PodScheduled", "status": "True"}]


def test_a_pod_evicted_for_node_pressure_fails_once_terminal_with_a_disruption_target(
        ) -> None:
    evicted = Eviction(reason="Evicted", message="low on memory")
    assert _status(_pod(), eviction=evicted)["phase"] == "Pending"
    status = _status(_pod(), eviction=evicted, terminal=True)
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    target = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
    assert target and target[0]["reason"] == "TerminationByKubelet"


def test_a_pod_past_its_active_deadline_fails_at_once() -> None:
    status = _status(_pod(), eviction=Eviction(reason="DeadlineExceeded", message="late"))
    assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")
    assert not [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]


def test_the_pod_ip_is_the_sandboxs_and_a_phase_never_goes_back() -> None:
    status = _status(_pod(), pod_ip="10.244.1.5", phase_seen="Running")
    assert (status["podIP"], status["hostIP"]) == ("10.244.1.5", "127.0.0.1")
    assert status["phase"] == "Running"
    assert _status(_pod())["podIP"] == "127.0.0.1"
