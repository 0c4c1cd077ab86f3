"""The pod status the kubelet reports (LC1, LC2, LC5, LC6, GT10, GT12), as pure functions.

Phase from container states (Kubernetes' `getPhase`), the conditions the kubelet owns
(PodReadyToStartContainers, Initialized, ContainersReady, Ready with readinessGates), and
the merge that keeps conditions others own (PodScheduled, DisruptionTarget, the gates'
own conditions set through the status subresource). The kubelet never reports Unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

from skiff.api.quantity import bytes_, cpu_millis
from skiff.api.types import Obj
from skiff.clock import rfc3339
from skiff.kubelet.records import APP, INIT, SIDECAR, ContainerRecord

__all__ = ["KUBELET_CONDITIONS", "container_status", "merge_conditions", "pod_phase",
           "qos_class", "ready_conditions"]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
_PHASE_ORDER = {"Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}


def container_status(record: ContainerRecord) -> Obj:
    status: Obj = {
        "name": record.name, "image": record.image or record.spec.get("image", ""),
        "imageID": "", "state": record.state, "lastState": record.last_state,
        "ready": record.ready, "restartCount": record.restart_count,
        "started": record.started if record.running else False,
    }
    if record.handle is not None:
        status["containerID"] = record.handle.id
    return status


def _init_container_initialized(r: ContainerRecord) -> bool:
    """Kubernetes' isInitContainerInitialized: a sidecar has started (LC4: or has run and
    is being restarted), a regular init container succeeded."""
    if r.kind == SIDECAR:
        return r.started or (r.has_run() and r.restart_count > 0)
    return r.exit_code == 0 and r.has_run() and not r.running


def init_done(records: Sequence[ContainerRecord]) -> bool:
    """Every regular init container succeeded and every sidecar has started (LC4)."""
    return all(_init_container_initialized(r) for r in records if r.kind in (INIT, SIDECAR))


def pod_phase(records: Sequence[ContainerRecord], *, restart_policy: str,
              terminating: bool, previous: str = "Pending",
              init_failed: bool = False) -> str:
    """`getPhase`: Pending → Running → Succeeded/Failed; never back to an earlier phase.

    `terminating` means the kubelet will not start anything again (deleted or evicted), so
    stopped containers decide Succeeded/Failed whatever the restart policy (GT10).
    """
    if previous in ("Succeeded", "Failed"):
        return previous
    apps = [r for r in records if r.kind == APP]
    if init_failed:
        phase = "Failed"
    elif not init_done(records) and not terminating:
        phase = "Pending"
    else:
        # LC8: a container is not Running until its postStart hook returned.
        running = sum(1 for r in apps if r.running and r.post_start_done)
        never_ran = sum(1 for r in apps if not r.has_run()
                        or (r.running and not r.post_start_done and r.restart_count == 0))
        stopped = [r for r in apps if r.has_run() and not r.running]
        succeeded = sum(1 for r in stopped if r.exit_code == 0)
        if terminating and running == 0 and not any(r.running for r in records):
            phase = "Succeeded" if apps and succeeded == len(apps) else "Failed"
        elif never_ran and not terminating:
            phase = "Pending" if running == 0 and not stopped else "Running"
        elif running:
            phase = "Running"
        elif restart_policy == "Always":
            phase = "Running"
        elif succeeded == len(stopped) and stopped:
            phase = "Succeeded"
        elif restart_policy == "Never":
            phase = "Failed"
        else:  # OnFailure: failed containers will be restarted
            phase = "Running"
    if _PHASE_ORDER.get(phase, 0) < _PHASE_ORDER.get(previous, 0):
        return previous
    return phase


def _any_app_started(records: Sequence[ContainerRecord]) -> bool:
    """Kubernetes' HasAnyRegularContainerStarted: an app container is running or
    terminated, so initialization was done (whatever its sidecars do since)."""
    return any(r.kind == APP and ("running" in r.state or "terminated" in r.state)
               for r in records)


def ready_conditions(records: Sequence[ContainerRecord], pod: Obj, *,
                     sandbox_ready: bool, phase: str = "Running") -> list[Obj]:
    """The four kubelet conditions as (type, status, reason, message) dicts, no times.

    As Kubernetes' status generation: a Succeeded pod is Initialized (reason
    PodCompleted), as is one whose app containers have started, even when its sidecars
    were stopped since (a Job pod with a sidecar stays `Completed`, not `Init:Error`); a
    terminal pod's ContainersReady and Ready are False with reason PodCompleted or
    PodFailed.
    """
    spec = pod.get("spec", {})
    incomplete = [r.name for r in records if r.kind in (INIT, SIDECAR)
                  and not _init_container_initialized(r)]
    initialized = not incomplete or phase == "Succeeded" or _any_app_started(records)
    unready = [r.name for r in records if r.kind in (APP, SIDECAR) and not r.ready]
    containers_ready = initialized and not unready
    conds: list[Obj] = [
        {"type": "PodReadyToStartContainers", "status": str(sandbox_ready)},
        {"type": "Initialized", "status": str(initialized)},
    ]
    if phase == "Succeeded":
        conds[1]["reason"] = "PodCompleted"
    elif not initialized:
        conds[1].update(reason="ContainersNotInitialized",
                        message=f"containers with incomplete status: [{' '.join(incomplete)}]")
    cr: Obj = {"type": "ContainersReady", "status": str(containers_ready)}
    if phase in ("Succeeded", "Failed"):
        cr.update(status="False",
                  reason="PodCompleted" if phase == "Succeeded" else "PodFailed")
    elif not containers_ready:
        cr.update(reason="ContainersNotReady",
                  message=f"containers with unready status: [{' '.join(unready)}]")
    conds.append(cr)
    ready: Obj = {"type": "Ready", "status": cr["status"]}
    if cr["status"] != "True":
        ready.update({k: cr[k] for k in ("reason", "message") if k in cr})
    else:
        # LC6: every readiness gate's condition must be True; a missing one counts as False.
        existing = {c.get("type"): c for c in pod.get("status", {}).get("conditions") or []}
        missing = [g["conditionType"] for g in spec.get("readinessGates") or []
                   if existing.get(g.get("conditionType"), {}).get("status") != "True"]
        if missing:
            ready.update(status="False", reason="ReadinessGatesNotReady",
                         message="corresponding condition of pod readiness gate "
                                 f"\"{missing[0]}\" does not exist or is not True.")
    conds.append(ready)
    return conds


def merge_conditions(existing: Sequence[Obj], owned: Sequence[Obj], *, now: float) -> list[Obj]:
    """Replace the kubelet's own conditions, keep everyone else's; keep transition times
    of conditions whose status did not change."""
    old = {c.get("type"): c for c in existing}
    merged = [c for c in existing if c.get("type") not in KUBELET_CONDITIONS]
    for cond in owned:
        previous = old.get(cond["type"])
        entry: Obj = {"type": cond["type"], "status": cond["status"], "lastProbeTime": None}
        if previous is not None and previous.get("status") == cond["status"]:
            entry["lastTransitionTime"] = previous.get("lastTransitionTime") or rfc3339(now)
        else:
            entry["lastTransitionTime"] = rfc3339(now)
        for key in ("reason", "message"):
            if cond.get(key):
                entry[key] = cond[key]
        merged.append(entry)
    return merged


def qos_class(pod: Obj) -> str:
    """BestEffort (no requests or limits), Guaranteed (limits = requests for cpu and memory
    in every container) or Burstable."""
    containers = list(pod.get("spec", {}).get("containers") or []) + list(
        pod.get("spec", {}).get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for name, parse in (("cpu", cpu_millis), ("memory", bytes_)):
            if name not in lim or parse(lim[name]) != parse(req.get(name, lim[name])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_requests_memory(pod: Obj) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        if "memory" in req:
            total += bytes_(req["memory"])
    return total
