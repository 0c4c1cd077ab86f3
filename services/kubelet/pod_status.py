"""A pod's status as its worker computes and writes it (GT10, GT11, GT12, LC1, LC2).

`generate_pod_status` is Kubernetes' generateAPIPodStatus for one pod: the phase, the
conditions the kubelet owns, IPs, startTime, qosClass and every container's status, from
the worker's container records and what it knows (rejected, evicted, terminal); the pure
pieces live in `status`. `PodStatusWriter` is the per-pod part of Kubernetes' status
manager: it writes through the status subresource, skips a write that changes nothing, and
on a conflict re-reads the pod and computes again; and, as the status manager does once a
deleted pod's processes are all gone, it finishes the deletion with period 0 (GT10, PS1).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skiff.api.errors import ApiError, Reason
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import rfc3339
from skiff.kubelet.admission import Rejection
from skiff.kubelet.handlers import POD_IP
from skiff.kubelet.records import APP, EPHEMERAL, INIT, SIDECAR, ContainerRecord
from skiff.kubelet.status import (
    container_status,
    merge_conditions,
    pod_phase,
    qos_class,
    ready_conditions,
)

__all__ = ["Eviction", "PodStatusWriter", "generate_pod_status", "resource_version"]

log = logging.getLogger(__name__)

_PHASE_ORDER = {"Pending": 0, "Running": 1}


def resource_version(obj: Obj) -> int:
    try:
        return int(obj.get("metadata", {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass(frozen=True)
class Eviction:
    """Why the kubelet is killing the pod on its own: Evicted (GT11), DeadlineExceeded,
    VolumeDetached; the status's reason and message."""

    reason: str
    message: str


def generate_pod_status(pod: Obj, *, records: Sequence[ContainerRecord],
                        rejection: Rejection | None, phase_seen: str, terminal: bool,
                        init_failed: bool, eviction: Eviction | None,
                        start_time: str | None, pod_ip: str | None, now: float) -> Obj:
    """The status to write for `pod`. `phase_seen`: the furthest phase already reported
    (a phase never goes back); `pod_ip`: the sandbox's address (None: the node's)."""
    if rejection is not None:
        # As Kubernetes' rejectPod: only the phase and why (the scheduler's
        # PodScheduled condition stays).
        return {**deep_copy(pod.get("status") or {}), "phase": "Failed",
                "reason": rejection.reason,
                "message": f"Pod was rejected: {rejection.message}",
                "qosClass": qos_class(pod)}
    spec = pod.get("spec", {})
    previous = str(pod.get("status", {}).get("phase") or "Pending")
    if _PHASE_ORDER.get(previous, 2) < _PHASE_ORDER.get(phase_seen, 2):
        previous = phase_seen
    phase = pod_phase(records, restart_policy=str(spec.get("restartPolicy", "Always")),
                      terminating=terminal, previous=previous, init_failed=init_failed)
    # Kubernetes' generateAPIPodStatus fails a pod whose active deadline passed at once
    # (ShouldEvict), while its containers are still being killed; an evicted pod fails
    # once terminal.
    if eviction is not None and (terminal or eviction.reason == "DeadlineExceeded"):
        phase = "Failed"
    owned = ready_conditions(records, pod, sandbox_ready=not terminal, phase=phase)
    ip = pod_ip or POD_IP
    status: Obj = deep_copy(pod.get("status") or {})
    status.update({
        "phase": phase,
        "conditions": merge_conditions(status.get("conditions") or [], owned, now=now),
        "hostIP": POD_IP, "hostIPs": [{"ip": POD_IP}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": start_time, "qosClass": qos_class(pod),
        "containerStatuses": [container_status(r) for r in records if r.kind == APP],
    })
    inits = [container_status(r) for r in records if r.kind in (INIT, SIDECAR)]
    if inits:
        status["initContainerStatuses"] = inits
    ephemeral = [container_status(r) for r in records if r.kind == EPHEMERAL]
    if ephemeral:
        status["ephemeralContainerStatuses"] = ephemeral
    if eviction is not None:
        status["reason"] = eviction.reason
        status["message"] = eviction.message
        if eviction.reason == "Evicted":
            status["conditions"] = _with_disruption_target(
                status["conditions"], message=eviction.message, now=now)
    return status


def _with_disruption_target(conditions: list[Obj], *, message: str, now: float) -> list[Obj]:
    """GT11: a pod the kubelet evicts for node pressure carries DisruptionTarget=True,
    reason TerminationByKubelet (Kubernetes' eviction manager)."""
    if any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
           for c in conditions):
        return conditions
    return [c for c in conditions if c.get("type") != "DisruptionTarget"] + [{
        "type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
        "message": message, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}]


class PodStatusWriter:
    """Writes one pod's status: `pod()` is the pod as its worker knows it now,
    `compute(pod)` the status for that version of it, `written(pod)` takes the pod as
    written back."""

    def __init__(self, *, api: ApiClient, uid: str, namespace: str, name: str,
                 pod: Callable[[], Obj], compute: Callable[[Obj], Obj],
                 written: Callable[[Obj], None]) -> None:
        self._api = api
        self._uid = uid
        self._namespace = namespace
        self._name = name
        self._pod = pod
        self._compute = compute
        self._written = written
        self._last_written: Obj | None = None

    async def run(self, dirty: asyncio.Event) -> None:
        """Write whenever `dirty` is set, so the status stays current (GT12)."""
        while True:
            await dirty.wait()
            dirty.clear()
            await self.write()

    async def write(self) -> None:
        """Write the status computed for the pod (again for the pod read back after a
        conflict), unless it is what was written last."""
        pod = self._pod()
        for attempt in range(8):
            status = self._compute(pod)
            if status == self._last_written and attempt == 0:
                return
            body = deep_copy(pod)
            body["status"] = status
            try:
                written = await self._api.update_status(body)
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                if err.reason != Reason.CONFLICT:
                    log.warning("status write failed; retrying", extra={
                        "pod": f"{self._namespace}/{self._name}", "error": err.message})
                    await asyncio.sleep(min(0.1 * 2 ** attempt, 2.0))
                try:
                    pod = await self._api.get("pods", self._name, self._namespace)
                except ApiError:
                    return
                if pod["metadata"].get("uid") != self._uid:
                    return
                continue
            self._last_written = status
            self._written(written)
            return

    async def delete(self) -> bool:
        """Delete the pod with period 0 (only this uid); True once it is gone from the API,
        False after a failure (pausing a second before the caller retries)."""
        try:
            await self._api.delete("pods", self._name, self._namespace,
                                   grace_period_seconds=0, uid=self._uid)
            log.info("pod deleted after its processes exited",
                     extra={"pod": f"{self._namespace}/{self._name}", "uid": self._uid})
            return True
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return True
            log.warning("could not delete pod; retrying", extra={
                "pod": f"{self._namespace}/{self._name}", "error": err.message})
            await asyncio.sleep(1.0)
            return False
