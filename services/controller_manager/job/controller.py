"""The Job controller (pkg/controller/job): pods run until `completions` succeed.

Pods carry the `batch.kubernetes.io/job-tracking` finalizer, so a finished pod is counted
exactly once even when it is being deleted (preemption, eviction): the controller counts
it into `status.succeeded` / `status.failed` (recording its uid in
`uncountedTerminatedPods` until the finalizer is off), then removes the finalizer. A failed
pod goes through `podFailurePolicy` first (`Ignore` does not count against `backoffLimit`,
`FailJob` fails the Job). The Job fails on `backoffLimit` (BackoffLimitExceeded),
`activeDeadlineSeconds` (DeadlineExceeded) or a FailJob rule (PodFailurePolicy) — the
FailureTarget condition first, Failed once no pod runs — and completes (SuccessCriteriaMet,
then Complete) when enough pods, or every index of an Indexed Job, succeeded. A finished Job
is deleted `ttlSecondsAfterFinished` later. Failed pods are replaced without Kubernetes'
exponential back-off delay.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.workloads import JOB_INDEX_ANNOTATION
from skiff.client import NORMAL, WARNING, object_key
from skiff.clock import parse_rfc3339, rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.expectations import Expectations
from skiff.controller_manager.informers import BY_CONTROLLER_UID
from skiff.controller_manager.job.policy import (
    format_indexes,
    match_failure_policy,
    parse_indexes,
)
from skiff.controller_manager.podutil import is_pod_ready
from skiff.controller_manager.workload import owner_key, pod_from_template

log = logging.getLogger(__name__)

Obj = dict[str, Any]
KIND = "Job"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def _condition(job: Obj, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def finished(job: Obj) -> bool:
    return _condition(job, "Complete") or _condition(job, "Failed")


def _index(pod: Obj) -> int | None:
    try:
        return int((pod["metadata"].get("annotations") or {})[JOB_INDEX_ANNOTATION])
    except (KeyError, ValueError):
        return None


class JobController(Controller):
    name = "job"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2)
        self.jobs = context.informers.resource("jobs")
        self.pods = context.informers.pods()
        self.recorder = context.recorder("job-controller")
        self.expectations = Expectations(clock=context.clock)
        self.jobs.add_handler(on_add=self._on_job, on_update=lambda _o, n: self._on_job(n),
                              on_delete=self._on_job)
        self.pods.add_handler(on_add=self._on_pod_add, on_update=self._on_pod_update,
                              on_delete=self._on_pod_delete)

    def _on_job(self, job: Obj) -> None:
        self.enqueue(object_key(job))

    def _on_pod_add(self, pod: Obj) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.expectations.creation_observed(key)
            self.enqueue(key)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        key = owner_key(new, KIND)
        if key is not None:
            if is_terminating(new) and not is_terminating(old):
                self.expectations.deletion_observed(key, object_key(new))
            self.enqueue(key)

    def _on_pod_delete(self, pod: Obj) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.enqueue(key)

    async def reconcile(self, key: str) -> float | None:
        job = self.jobs.store.get(key)
        if job is None:
            self.expectations.forget(key)
            return None
        uid = str(job["metadata"].get("uid"))
        pods = [p for p in self.pods.store.by_index(BY_CONTROLLER_UID, uid)
                if p["metadata"].get("namespace") == job["metadata"].get("namespace")]
        if finished(job):
            await self._release(pods, set())
            return await self._ttl(job)
        return await self.sync(job, key, pods)

    async def sync(self, job: Obj, key: str, pods: list[Obj]) -> float | None:
        spec = job["spec"]
        status = copy.deepcopy(job.get("status") or {})
        now = self.clock.now()
        if not status.get("startTime") and not spec.get("suspend"):
            status["startTime"] = rfc3339(now)
        tracked = {str(p["metadata"].get("uid")) for p in pods
                   if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])}
        uncounted = {k: [u for u in (status.get("uncountedTerminatedPods") or {}).get(k) or []
                         if u in tracked] for k in ("succeeded", "failed")}
        counted = set(uncounted.get("succeeded") or []) | set(uncounted.get("failed") or [])
        indexed = spec.get("completionMode") == "Indexed"
        completed_indexes = parse_indexes(status.get("completedIndexes"))
        fail_reason: tuple[str, str] | None = None
        newly_counted: set[str] = set()
        for pod in pods:
            puid = str(pod["metadata"].get("uid"))
            phase = (pod.get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed") or puid in counted or \
                    TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            newly_counted.add(puid)
            if phase == "Succeeded":
                status["succeeded"] = int(status.get("succeeded") or 0) + 1
                uncounted.setdefault("succeeded", []).append(puid)
                if indexed and _index(pod) is not None:
                    completed_indexes.add(int(_index(pod) or 0))
                continue
            action, _ = match_failure_policy(spec.get("podFailurePolicy"), pod)
            if action == "Ignore":
                await self.recorder.event(job, NORMAL, "PodFailurePolicy",
                                          f"Pod {pod['metadata']['name']} failed; ignored by "
                                          "the pod failure policy")
                continue
            status["failed"] = int(status.get("failed") or 0) + 1
            uncounted.setdefault("failed", []).append(puid)
            if action == "FailJob":
                fail_reason = ("PodFailurePolicy",
                               f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']} "
                               "has condition or exit code matching a FailJob rule")
        if indexed:
            status["completedIndexes"] = format_indexes(completed_indexes)
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in (
            "Succeeded", "Failed") and not is_terminating(p)]
        terminating = [p for p in pods if is_terminating(p) and (p.get("status") or {}).get(
            "phase") not in ("Succeeded", "Failed")]
        if fail_reason is None and int(status.get("failed") or 0) > int(
                spec.get("backoffLimit", 6)):
            fail_reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        after: float | None = None
        if fail_reason is None and deadline is not None and status.get("startTime"):
            left = parse_rfc3339(status["startTime"]) + float(deadline) - now
            if left <= 0:
                fail_reason = ("DeadlineExceeded", "Job was active longer than specified "
                                                   "deadline")
            else:
                after = left
        completions = spec.get("completions")
        succeeded = int(status.get("succeeded") or 0)
        if indexed:
            complete = completions is not None and len(completed_indexes) >= int(completions)
        elif completions is not None:
            complete = succeeded >= int(completions)
        else:
            complete = succeeded > 0 and not active
        conditions = [dict(c) for c in status.get("conditions") or []]
        target = next((c for c in conditions if c.get("type") == "FailureTarget"), None)
        if target is not None:  # the first reason stays, whatever the killed pods add
            fail_reason = (str(target.get("reason")), str(target.get("message")))
        if fail_reason is not None:
            _set(conditions, "FailureTarget", fail_reason, now)
            await self._delete_pods(job, key, active)
            if not active and not terminating:
                _set(conditions, "Failed", fail_reason, now)
                await self.recorder.event(job, WARNING, fail_reason[0], fail_reason[1])
        elif complete:
            _set(conditions, "SuccessCriteriaMet", ("CompletionsReached",
                                                    "Reached expected number of succeeded "
                                                    "pods"), now)
            await self._delete_pods(job, key, active)
            if not active and not terminating:
                _set(conditions, "Complete", ("CompletionsReached",
                                              "Reached expected number of succeeded pods"), now)
                status["completionTime"] = rfc3339(now)
                await self.recorder.event(job, NORMAL, "Completed", "Job completed")
        elif self.expectations.satisfied(key):
            await self.manage(job, key, active, terminating, succeeded, completed_indexes)
        status.update(active=len(active), ready=sum(1 for p in active if is_pod_ready(p)),
                      terminating=len(terminating), conditions=conditions,
                      uncountedTerminatedPods=uncounted)
        status.setdefault("succeeded", 0)
        status.setdefault("failed", 0)
        if not conditions:
            status.pop("conditions")
        if status != (job.get("status") or {}):
            updated = copy.deepcopy(job)
            updated["status"] = status
            try:
                await self.client.update_status(updated)
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return None
                raise
        # Counted pods lose the finalizer only once their count is stored.
        await self._release(pods, newly_counted | counted)
        return after

    async def manage(self, job: Obj, key: str, active: list[Obj], terminating: list[Obj],
                     succeeded: int, completed_indexes: set[int]) -> None:
        spec = job["spec"]
        parallelism = 0 if spec.get("suspend") else int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        # podReplacementPolicy Failed: a terminating pod is replaced only once it failed.
        busy = len(active) + (len(terminating) if spec.get("podReplacementPolicy") ==
                              "Failed" else 0)
        if spec.get("completionMode") == "Indexed" and completions is not None:
            taken = {_index(p) for p in active + terminating}
            pending = [i for i in range(int(completions))
                       if i not in completed_indexes and i not in taken]
            room = max(0, parallelism - busy)
            to_create: list[int | None] = list(pending[:room])
        else:
            wanted = parallelism if completions is None else min(
                parallelism, int(completions) - succeeded)
            to_create = [None] * max(0, wanted - busy)
            if busy > wanted and active:
                await self._delete_pods(job, key, active[:busy - wanted])
        if not to_create:
            return
        self.expectations.expect(key, adds=len(to_create))
        for n, index in enumerate(to_create):
            try:
                await self._create(job, index)
            except ApiError:
                self.expectations.lower(key, adds=len(to_create) - n)
                raise

    async def _create(self, job: Obj, index: int | None) -> None:
        pod = pod_from_template(job)
        meta = pod["metadata"]
        meta["finalizers"] = [*meta.get("finalizers", []), TRACKING_FINALIZER]
        name = job["metadata"]["name"]
        if index is None:
            meta["generateName"] = f"{name}-"
        else:
            meta["generateName"] = f"{name}-{index}-"
            meta.setdefault("annotations", {})[JOB_INDEX_ANNOTATION] = str(index)
            meta["labels"][JOB_INDEX_ANNOTATION] = str(index)
            pod["spec"].setdefault("hostname", f"{name}-{index}")
            for container in pod["spec"].get("containers") or []:
                container.setdefault("env", []).append(
                    {"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        try:
            created = await self.client.create(pod)
        except ApiError as err:
            await self.recorder.event(job, WARNING, "FailedCreate",
                                      f"Error creating: {err.message}")
            raise
        await self.recorder.event(job, NORMAL, "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}")

    async def _delete_pods(self, job: Obj, key: str, pods: list[Obj]) -> None:
        if not pods:
            return
        self.expectations.expect(key, deletes={object_key(p) for p in pods})
        for pod in pods:
            meta = pod["metadata"]
            try:
                await self.client.delete("pods", meta["name"], meta.get("namespace"),
                                         uid=meta.get("uid"))
            except ApiError as err:
                self.expectations.lower(key, deleted=object_key(pod))
                if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                    raise
                continue
            await self.recorder.event(job, NORMAL, "SuccessfulDelete",
                                      f"Deleted pod: {meta['name']}")

    async def _release(self, pods: list[Obj], uids: set[str]) -> None:
        """Remove the tracking finalizer from counted pods (every finished pod once the Job
        is finished)."""
        for pod in pods:
            meta = pod["metadata"]
            if TRACKING_FINALIZER not in (meta.get("finalizers") or []):
                continue
            phase = (pod.get("status") or {}).get("phase")
            if uids and str(meta.get("uid")) not in uids:
                continue
            if not uids and phase not in ("Succeeded", "Failed"):
                continue
            for _ in range(5):
                try:
                    live = await self.client.get("pods", meta["name"], meta.get("namespace"))
                except ApiError as err:
                    if err.reason == Reason.NOT_FOUND:
                        break
                    raise
                if live["metadata"].get("uid") != meta.get("uid"):
                    break
                live["metadata"]["finalizers"] = [
                    f for f in live["metadata"].get("finalizers") or []
                    if f != TRACKING_FINALIZER]
                try:
                    await self.client.update(live)
                    break
                except ApiError as err:
                    if err.reason == Reason.NOT_FOUND:
                        break
                    if err.reason != Reason.CONFLICT:
                        raise

    async def _ttl(self, job: Obj) -> float | None:
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return None
        finished_at = max((parse_rfc3339(c["lastTransitionTime"])
                           for c in job["status"].get("conditions") or []
                           if c.get("type") in ("Complete", "Failed")
                           and c.get("lastTransitionTime")), default=self.clock.now())
        left = finished_at + float(ttl) - self.clock.now()
        if left > 0:
            return left
        meta = job["metadata"]
        try:
            await self.client.delete("jobs", meta["name"], meta.get("namespace"),
                                     uid=meta.get("uid"), propagation_policy="Background")
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
        return None


def _set(conditions: list[Obj], type_: str, reason: tuple[str, str], now: float) -> None:
    for cond in conditions:
        if cond.get("type") == type_:
            return
    stamp = rfc3339(now)
    conditions.append({"type": type_, "status": "True", "reason": reason[0],
                       "message": reason[1], "lastProbeTime": stamp,
                       "lastTransitionTime": stamp})
