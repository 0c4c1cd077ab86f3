"""A container the runtime no longer has is reported as
Kubernetes' convertToAPIContainerStatuses reports it, and its restart counted once."""

from __future__ import annotations

from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.status import container_status
from skiff.kubelet.unknownstatus import count_restart, mark_lost

LOST_WHILE_RUNNING = ("The container could not be located when the pod was deleted.  "
                      "The container used to be Running")


def running_record() -> ContainerRecord:
    return ContainerRecord(spec={"name": "main", "image": "busybox"}, kind="app",
                           attempts=1, ready=True, started=True,
                           state={"running": {"startedAt": "2026-01-01T00:00:00Z"}})


def test_defect8_b_a_lost_container_waits_with_status_unknown_and_its_restart_counted() -> None:
    r = running_record()
    mark_lost(r, now=0.0, deleting=False, has_init_containers=False)
    status = container_status(r)
    assert status["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["lastState"]["terminated"] == {
        "exitCode": 137, "reason": "ContainerStatusUnknown", "message": LOST_WHILE_RUNNING,
        "finishedAt": "1970-01-01T00:00:00Z"}
    assert status["restartCount"] == 1 and not status["ready"] and not status["started"]
    assert "containerID" not in status  # no container of the runtime to name
    count_restart(r)  # the restart it was counted for
    assert r.restart_count == 1
    count_restart(r)  # a later one counts
    assert r.restart_count == 2


def test_defect8_b_a_lost_container_of_a_pod_with_init_containers_waits_pod_initializing(
        ) -> None:
    r = running_record()
    mark_lost(r, now=0.0, deleting=False, has_init_containers=True)
    assert r.state == {"waiting": {"reason": "PodInitializing"}}


def test_defect8_b_a_lost_container_of_a_pod_being_deleted_is_terminated_uncounted() -> None:
    r = running_record()
    mark_lost(r, now=0.0, deleting=True, has_init_containers=False)
    assert r.state["terminated"]["reason"] == "ContainerStatusUnknown"
    assert r.state["terminated"]["exitCode"] == 137
    assert r.state["terminated"]["message"] == (
        "The container could not be located when the pod was terminated")
    assert r.last_state["terminated"]["message"] == LOST_WHILE_RUNNING
    assert r.restart_count == 0 and r.exit_code == 137 and not r.running
