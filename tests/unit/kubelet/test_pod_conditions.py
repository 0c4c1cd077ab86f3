"""The kubelet's conditions as Kubernetes' status generation: a completed pod (a Job pod
whose native sidecar was stopped after the main container finished) stays Initialized with
reason PodCompleted, and a terminal pod's ContainersReady/Ready carry PodCompleted or
PodFailed."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.kubelet.records import APP, INIT, SIDECAR, ContainerRecord
from skiff.kubelet.status import ready_conditions


def _terminated(spec: Obj, kind: str, code: int, *, restarts: int = 0) -> ContainerRecord:
    return ContainerRecord(spec=spec, kind=kind, attempts=1 + restarts, exit_code=code,
                           restart_count=restarts, finished_at=1.0,
                           state={"terminated": {"exitCode": code,
                                                 "reason": "Completed" if code == 0
                                                 else "Error"}})


def _conditions(records: list[ContainerRecord], phase: str) -> dict[str, Obj]:
    pod: Obj = {"metadata": {"name": "p"}, "spec": {}}
    return {c["type"]: c for c in ready_conditions(records, pod, sandbox_ready=False,
                                                   phase=phase)}


def _job_pod() -> list[ContainerRecord]:
    # the sidecar was stopped with SIGTERM once the main container completed: exit 143
    return [_terminated({"name": "proxy", "restartPolicy": "Always"}, SIDECAR, 143),
            _terminated({"name": "main"}, APP, 0)]


def test_lc5_completed_job_pod_with_stopped_sidecar_stays_initialized_pod_completed() -> None:
    conds = _conditions(_job_pod(), "Succeeded")
    assert conds["Initialized"] == {"type": "Initialized", "status": "True",
                                    "reason": "PodCompleted"}
    for kind in ("ContainersReady", "Ready"):
        assert conds[kind] == {"type": kind, "status": "False", "reason": "PodCompleted"}


def test_lc5_pod_whose_app_started_stays_initialized_while_its_sidecar_is_down() -> None:
    records = _job_pod()
    records[1].state = {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
    records[1].exit_code = None
    conds = _conditions(records, "Running")
    assert conds["Initialized"]["status"] == "True"
    assert "reason" not in conds["Initialized"]
    assert conds["ContainersReady"]["reason"] == "ContainersNotReady"


def test_lc5_failed_pod_conditions_say_pod_failed() -> None:
    records = [_terminated({"name": "main"}, APP, 1)]
    conds = _conditions(records, "Failed")
    assert conds["Initialized"]["status"] == "True"
    for kind in ("ContainersReady", "Ready"):
        assert conds[kind] == {"type": kind, "status": "False", "reason": "PodFailed"}


def test_lc5_init_container_not_done_before_any_app_ran_is_not_initialized() -> None:
    records = [_terminated({"name": "setup"}, INIT, 1),
               ContainerRecord(spec={"name": "main"}, kind=APP)]
    conds = _conditions(records, "Pending")
    assert conds["Initialized"] == {
        "type": "Initialized", "status": "False", "reason": "ContainersNotInitialized",
        "message": "containers with incomplete status: [setup]"}
