"""Containers the runtime no longer has: reported as Kubernetes reports them, then restarted.

A kubelet that comes back after a crash or a power cycle finds, in a pod's saved state, a
container that was running and whose process is gone (a reboot ends every process, and a
PID is only trusted with its recorded start time). It must never go on reporting it
`Running`. Kubernetes' status conversion (`convertToAPIContainerStatuses`) says what
happened instead: the container is waiting again (ContainerCreating, or PodInitializing in
a pod with init containers) with `lastState.terminated` reason `ContainerStatusUnknown`,
exit code 137, and the restart is counted at once unless the pod is being deleted; a pod
being deleted shows it terminated for the same reason. The restart policy then decides
whether it runs again; the restart it was counted for is not counted a second time.
"""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.clock import rfc3339
from skiff.kubelet.records import ContainerRecord

__all__ = ["LOST_EXIT_CODE", "LOST_REASON", "count_restart", "mark_lost"]

LOST_REASON = "ContainerStatusUnknown"
LOST_EXIT_CODE = 137  # as if SIGKILLed: the container did not end on its own
# Kubernetes' texts (kubelet_pods.go), two spaces included, which clients match on.
_LOST_WHILE_RUNNING = ("The container could not be located when the pod was deleted.  "
                       "The container used to be Running")
_LOST_AT_TERMINATION = "The container could not be located when the pod was terminated"


def mark_lost(record: ContainerRecord, *, now: float, deleting: bool,
              has_init_containers: bool) -> None:
    """`record` was running and its process is gone: record it as lost, as above."""
    lost: Obj = {"exitCode": LOST_EXIT_CODE, "reason": LOST_REASON,
                 "message": _LOST_WHILE_RUNNING, "finishedAt": rfc3339(now)}
    record.handle = None
    record.exit_code = LOST_EXIT_CODE
    record.finished_at = now
    record.ready = False
    record.started = False
    record.last_state = {"terminated": lost}
    if deleting:
        record.state = {"terminated": {**lost, "message": _LOST_AT_TERMINATION}}
        return
    record.state = {"waiting": {"reason": "PodInitializing" if has_init_containers
                                else "ContainerCreating"}}
    record.restart_count += 1
    record.restart_counted = True


def count_restart(record: ContainerRecord) -> None:
    """Count a restart of `record`, unless it was counted when its container was lost."""
    if record.restart_counted:
        record.restart_counted = False
        return
    record.restart_count += 1
