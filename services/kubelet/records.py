"""What the kubelet knows about each container of a pod, and how it survives a restart.

A `ContainerRecord` holds the live handle, the status fields Kubernetes reports (state,
lastState, restartCount, ready, started) and the probe bookkeeping. The pod directory keeps
a small JSON file of PIDs, start times and restart counts, so a restarted kubelet re-adopts
running processes instead of starting them twice (GT8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skiff.api.types import Obj
from skiff.kubelet.runtime import ContainerHandle
from skiff.podstate import load_state as load_state
from skiff.podstate import write_state

__all__ = ["APP", "EPHEMERAL", "INIT", "SIDECAR", "ContainerRecord", "ephemeral_records",
           "load_state", "save_state"]

INIT, SIDECAR, APP = "init", "sidecar", "app"
# added to a running pod (`kubectl debug`): started once, never restarted, not ready
EPHEMERAL = "ephemeral"


def pod_records(spec: Obj) -> list[ContainerRecord]:
    """A new pod's containers, init containers first, each waiting as Kubernetes reports a
    container not started yet: PodInitializing while the pod has init containers to run,
    ContainerCreating otherwise (kubectl's STATUS column for a new pod)."""
    inits = list(spec.get("initContainers") or [])
    app_reason = "PodInitializing" if inits else "ContainerCreating"
    return [ContainerRecord(spec=c, kind=SIDECAR if c.get("restartPolicy") == "Always"
                            else INIT) for c in inits] + [
        ContainerRecord(spec=c, kind=APP, state={"waiting": {"reason": app_reason}})
        for c in spec.get("containers") or []] + ephemeral_records(spec, [])


def ephemeral_records(spec: Obj, known: list[ContainerRecord]) -> list[ContainerRecord]:
    """Records of the pod's ephemeral containers not in `known` yet, waiting to start."""
    names = {r.name for r in known}
    return [ContainerRecord(spec=c, kind=EPHEMERAL,
                            state={"waiting": {"reason": "ContainerCreating"}})
            for c in spec.get("ephemeralContainers") or []
            if isinstance(c, dict) and c.get("name") not in names]


@dataclass(eq=False)
class ContainerRecord:
    spec: Obj
    kind: str
    handle: ContainerHandle | None = None
    restart_count: int = 0
    attempts: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last_state: Obj = field(default_factory=dict)
    started: bool = False  # postStart returned and the startup probe (if any) succeeded
    ready: bool = False
    post_start_done: bool = False
    killing: bool = False
    exit_code: int | None = None  # of the latest attempt, once it exited
    finished_at: float | None = None
    image: str = ""
    redefined: bool = False  # its definition changed: restart whatever the restartPolicy
    # its next restart was counted already, when its container was lost (unknownstatus)
    restart_counted: bool = False

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        """Started, and how it ended not yet recorded: a process that has just exited
        counts as running until its exit callback records it, so nothing restarts it (or
        takes an unrecorded exit for a failure) in between."""
        return self.handle is not None and (self.handle.running or self.finished_at is None)

    @property
    def succeeded(self) -> bool:
        return not self.running and self.exit_code == 0

    def has_run(self) -> bool:
        return self.attempts > 0

    def should_restart(self, policy: str) -> bool:
        """Its last attempt ended and the pod's restartPolicy (or a changed definition)
        starts it again."""
        if self.running or not self.has_run():
            return False
        return self.redefined or policy == "Always" or (policy == "OnFailure"
                                                        and self.exit_code != 0)

    def retire_termination(self) -> None:
        """LC2: lastState holds the latest termination, once state moves on from it."""
        if self.state.get("terminated"):
            self.last_state = {"terminated": self.state["terminated"]}


def save_state(pod_dir: Path, *, pod: Obj, records: list[ContainerRecord]) -> None:
    """Atomically write what a restarted kubelet needs to re-adopt the pod's processes."""
    meta = pod.get("metadata", {})
    data = {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
        "containers": {
            r.name: {
                "pid": r.handle.pid if r.handle else None,
                "pgid": r.handle.pgid if r.handle else None,
                "startTicks": r.handle.start_ticks if r.handle else None,
                "startedAt": r.handle.started_at if r.handle else None,
                "running": r.running,
                "restartCount": r.restart_count, "attempts": r.attempts,
                "exitCode": r.exit_code, "lastState": r.last_state, "state": r.state,
                "started": r.started, "restartCounted": r.restart_counted,
            } for r in records},
    }
    write_state(pod_dir, data)
