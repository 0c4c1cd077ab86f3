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
is deleted `ttlSecondsAfterFinished` later, and keeps no `uncountedTerminatedPods` and no
pod with the tracking finalizer once finished.

A failed pod is replaced after an exponential back-off (`--job-pod-failure-backoff` ×
2^(failures since the last success - 1), capped by `--job-pod-failure-backoff-max`). An
Indexed Job may limit failures per index (`backoffLimitPerIndex`: an index over its limit,
or hit by a FailIndex rule, joins `failedIndexes` and is not retried; more than
`maxFailedIndexes` of them fail the Job with MaxFailedIndexesExceeded, and a Job whose every
index finished with some failed fails with FailedIndexes), and may succeed early by a
`successPolicy` rule (SuccessCriteriaMet then Complete, reason SuccessPolicy; its remaining
pods are deleted). Orphan pods matching a Job's selector are adopted (with the tracking
finalizer) and owned pods that stop matching are released.

A suspended Job (`spec.suspend`) runs no pods: its active pods are deleted, whatever the
back-off, and its `activeDeadlineSeconds` does not run. As Kubernetes' syncJob does, each
sync that manages pods keeps a `Suspended` condition: True (JobSuspended, "Job suspended",
event Suspended) while suspended; False (JobResumed, "Job resumed", event Resumed) once
resumed, which also resets `status.startTime`, so the deadline counts the time the Job has
been continuously active. A Job never suspended has no such condition.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.api.wellknown import JOB_INDEX_ANNOTATION
from skiff.client import BY_NAMESPACE, NORMAL, WARNING, object_key
from skiff.clock import parse_rfc3339, rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import BY_CONTROLLER_UID, controller_ref
from skiff.controller_manager.job.policy import (
    failure_backoff,
    format_indexes,
    match_failure_policy,
    parse_indexes,
    success_policy_rule,
)
from skiff.controller_manager.podcontrol import PodControl
from skiff.controller_manager.podutil import is_pod_ready
from skiff.controller_manager.refmanager import RefManager
from skiff.controller_manager.workload import owned_pods, pod_from_template
from skiff.controller_manager.writes import try_update

log = logging.getLogger(__name__)

KIND = "Job"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"


@dataclass
class _Backoff:
    """Failures counted since the Job's last success, and when the last one was counted."""

    failures: int = 0
    last: float = 0.0


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
        self.pod_control = PodControl(self, kind=KIND, recorder=self.recorder,
                                      pods=self.pods, owners=self.jobs)
        self.expectations = self.pod_control.expectations
        self.backoff: dict[str, _Backoff] = {}
        settings = context.settings
        self.backoff_base = settings.job_pod_failure_backoff
        self.backoff_max = settings.job_pod_failure_backoff_max
        self.jobs.add_handler(on_add=self._on_job, on_update=lambda _o, n: self._on_job(n),
                              on_delete=self._on_job)

    def _on_job(self, job: Obj) -> None:
        self.enqueue(object_key(job))

    async def reconcile(self, key: str) -> float | None:
        job = self.jobs.store.get(key)
        if job is None:
            self.expectations.forget(key)
            self.backoff.pop(key, None)
            return None
        uid = str(job["metadata"].get("uid"))
        owned = owned_pods(self.pods.store.by_index(BY_CONTROLLER_UID, uid), job)
        if finished(job):
            await self._release(owned, set())
            await self._clear_uncounted(job)
            return await self._ttl(job)
        orphans = [p for p in self.pods.store.by_index(
            BY_NAMESPACE, str(job["metadata"].get("namespace"))) if controller_ref(p) is None]
        pods = await RefManager(self.client, job, "pods",
                                finalizers=(TRACKING_FINALIZER,)).claim(owned + orphans)
        return await self.sync(job, key, pods)

    async def sync(self, job: Obj, key: str, pods: list[Obj]) -> float | None:
        spec = job["spec"]
        status = copy.deepcopy(job.get("status") or {})
        now = self.clock.now()
        suspended = bool(spec.get("suspend"))
        # Resumed, but the Suspended condition does not say so yet: the deadline counts
        # from now (the stored startTime is from before the suspension).
        resuming = not suspended and _condition(job, "Suspended")
        if not status.get("startTime") and not suspended:
            status["startTime"] = rfc3339(now)
        tracked = {str(p["metadata"].get("uid")) for p in pods
                   if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])}
        uncounted = {k: [u for u in (status.get("uncountedTerminatedPods") or {}).get(k) or []
                         if u in tracked] for k in ("succeeded", "failed")}
        counted = set(uncounted.get("succeeded") or []) | set(uncounted.get("failed") or [])
        indexed = spec.get("completionMode") == "Indexed"
        per_index = indexed and spec.get("backoffLimitPerIndex") is not None
        completed_indexes = parse_indexes(status.get("completedIndexes"))
        failed_indexes = parse_indexes(status.get("failedIndexes"))
        fail_reason: tuple[str, str] | None = None
        newly_counted: set[str] = set()
        backoff = self.backoff.setdefault(key, _Backoff())
        # Pods the controller stops once the Job is failing do not fail their index.
        failing = any(c.get("type") == "FailureTarget" for c in status.get("conditions") or [])
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
                backoff.failures = 0
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
            backoff.failures += 1
            backoff.last = now
            index = _index(pod)
            if per_index and index is not None and not failing and (
                    action == "FailIndex" or _failure_count(pod) + 1 > int(
                        spec["backoffLimitPerIndex"])):
                failed_indexes.add(index)
            if action == "FailJob":
                fail_reason = ("PodFailurePolicy",
                               f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']} "
                               "has condition or exit code matching a FailJob rule")
        if indexed:
            status["completedIndexes"] = format_indexes(completed_indexes)
        if per_index:
            status["failedIndexes"] = format_indexes(failed_indexes - completed_indexes)
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in (
            "Succeeded", "Failed") and not is_terminating(p)]
        terminating = [p for p in pods if is_terminating(p) and (p.get("status") or {}).get(
            "phase") not in ("Succeeded", "Failed")]
        if per_index:  # a failed index runs no more pods
            await self._delete_pods(job, key, [p for p in active if _index(p) in failed_indexes])
            active = [p for p in active if _index(p) not in failed_indexes]
        if fail_reason is None and int(status.get("failed") or 0) > int(
                spec.get("backoffLimit", 6)):
            fail_reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        if fail_reason is None and per_index and spec.get("maxFailedIndexes") is not None \
                and len(failed_indexes) > int(spec["maxFailedIndexes"]):
            fail_reason = ("MaxFailedIndexesExceeded", "Job has exceeded the specified maximal "
                                                       "number of failed indexes")
        deadline = spec.get("activeDeadlineSeconds")
        after: float | None = None
        if fail_reason is None and deadline is not None and status.get("startTime") \
                and not suspended:
            start = now if resuming else parse_rfc3339(status["startTime"])
            left = start + float(deadline) - now
            if left <= 0:
                fail_reason = ("DeadlineExceeded", "Job was active longer than specified "
                                                   "deadline")
            else:
                after = left
        completions = spec.get("completions")
        succeeded = int(status.get("succeeded") or 0)
        success = ("CompletionsReached", "Reached expected number of succeeded pods")
        if indexed:
            rule = success_policy_rule(spec.get("successPolicy"), completed_indexes)
            complete = completions is not None and len(completed_indexes) >= int(completions)
            if rule is not None and not complete:
                complete = True
                success = ("SuccessPolicy", f"Matched rules at index {rule}")
            if per_index and fail_reason is None and failed_indexes and completions is not None \
                    and len(completed_indexes | failed_indexes) >= int(completions):
                fail_reason = ("FailedIndexes", "Job has failed indexes")
        elif completions is not None:
            complete = succeeded >= int(completions)
        else:
            complete = succeeded > 0 and not active
        conditions = [dict(c) for c in status.get("conditions") or []]
        target = next((c for c in conditions if c.get("type") == "FailureTarget"), None)
        if target is not None:  # the first reason stays, whatever the killed pods add
            fail_reason = (str(target.get("reason")), str(target.get("message")))
        met = next((c for c in conditions if c.get("type") == "SuccessCriteriaMet"), None)
        if met is not None:
            complete, fail_reason = True, None
            success = (str(met.get("reason")), str(met.get("message")))
        # A new FailureTarget / SuccessCriteriaMet is stored before the pods it stops are
        # deleted (Kubernetes records the interim condition first too): if the write
        # conflicts, nothing was stopped, and a later sync never reads a stopped pod's failure
        # from a copy of the Job that does not say it is failing.
        stop_after_write: list[Obj] = []
        if fail_reason is not None:
            _set(conditions, "FailureTarget", fail_reason, now)
            if target is None:
                stop_after_write = active
            else:
                await self._delete_pods(job, key, active)
            if not active and not terminating and not any(uncounted.values()):
                _set(conditions, "Failed", fail_reason, now)
                await self.recorder.event(job, WARNING, fail_reason[0], fail_reason[1])
        elif complete:
            _set(conditions, "SuccessCriteriaMet", success, now)
            if met is None:
                stop_after_write = active
            else:
                await self._delete_pods(job, key, active)
            if not active and not terminating and not any(uncounted.values()):
                _set(conditions, "Complete", success, now)
                status["completionTime"] = rfc3339(now)
                await self.recorder.event(job, NORMAL, "Completed", "Job completed")
        elif self.expectations.satisfied(key):
            wait = failure_backoff(backoff.failures, base=self.backoff_base,
                                   limit=self.backoff_max) - (now - backoff.last)
            if wait > 0 and not suspended:  # the back-off delays creations, not deletions
                after = wait if after is None else min(after, wait)
            else:
                await self.manage(job, key, pods, active, terminating, succeeded,
                                  completed_indexes | failed_indexes)
            await self.sync_suspended_condition(job, conditions, status, now=now)
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
        await self._delete_pods(job, key, stop_after_write)
        # Counted pods lose the finalizer only once their count is stored; the Job finishes
        # (Complete / Failed) on a later sync, once no pod is left uncounted.
        await self._release(pods, newly_counted | counted)
        return after

    async def sync_suspended_condition(self, job: Obj, conditions: list[Obj], status: Obj, *,
                                       now: float) -> None:
        """The Suspended condition follows `spec.suspend` (Kubernetes' syncJob, after
        manageJob): True with an event Suspended; False with an event Resumed and a new
        `startTime` once a suspended Job is resumed."""
        if job["spec"].get("suspend"):
            if _ensure_condition(conditions, "Suspended", "True",
                                 ("JobSuspended", "Job suspended"), now):
                log.info("job suspended", extra={"job": object_key(job)})
                await self.recorder.event(job, NORMAL, "Suspended", "Job suspended")
        elif _ensure_condition(conditions, "Suspended", "False",
                               ("JobResumed", "Job resumed"), now):
            status["startTime"] = rfc3339(now)
            log.info("job resumed", extra={"job": object_key(job)})
            await self.recorder.event(job, NORMAL, "Resumed", "Job resumed")

    async def manage(self, job: Obj, key: str, pods: list[Obj], active: list[Obj],
                     terminating: list[Obj], succeeded: int, done_indexes: set[int]) -> None:
        spec = job["spec"]
        if spec.get("suspend"):  # every active pod goes, Indexed or not
            await self._delete_pods(job, key, active)
            return
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        # podReplacementPolicy Failed: a terminating pod is replaced only once it failed.
        busy = len(active) + (len(terminating) if spec.get("podReplacementPolicy") ==
                              "Failed" else 0)
        if spec.get("completionMode") == "Indexed" and completions is not None:
            taken = {_index(p) for p in active + terminating}
            pending = [i for i in range(int(completions))
                       if i not in done_indexes and i not in taken]
            room = max(0, parallelism - busy)
            to_create: list[int | None] = list(pending[:room])
        else:
            wanted = parallelism if completions is None else min(
                parallelism, int(completions) - succeeded)
            to_create = [None] * max(0, wanted - busy)
            if busy > wanted and active:
                await self._delete_pods(job, key, active[:busy - wanted])
        failures = _index_failures(job, pods)
        await self.pod_control.create(job, key, [
            self._pod(job, index, 0 if index is None else failures.get(index, 0))
            for index in to_create])

    def _pod(self, job: Obj, index: int | None, failures: int) -> Obj:
        pod = pod_from_template(job)
        meta = pod["metadata"]
        meta["finalizers"] = [*meta.get("finalizers", []), TRACKING_FINALIZER]
        name = job["metadata"]["name"]
        if index is None:
            meta["generateName"] = f"{name}-"
        else:
            meta["generateName"] = f"{name}-{index}-"
            annotations = meta.setdefault("annotations", {})
            annotations[JOB_INDEX_ANNOTATION] = str(index)
            if job["spec"].get("backoffLimitPerIndex") is not None:
                annotations[INDEX_FAILURE_COUNT] = str(failures)
            meta["labels"][JOB_INDEX_ANNOTATION] = str(index)
            pod["spec"].setdefault("hostname", f"{name}-{index}")
            for container in pod["spec"].get("containers") or []:
                container.setdefault("env", []).append(
                    {"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        return pod

    async def _delete_pods(self, job: Obj, key: str, pods: list[Obj]) -> None:
        await self.pod_control.delete(job, key, pods)

    async def _clear_uncounted(self, job: Obj) -> None:
        """A finished Job has counted every pod: `uncountedTerminatedPods` is left empty."""
        status = job.get("status") or {}
        if not any((status.get("uncountedTerminatedPods") or {}).values()):
            return
        updated = copy.deepcopy(job)
        updated["status"]["uncountedTerminatedPods"] = {}
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise

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
                if (await try_update(self.client, live))[0]:
                    break

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


def _failure_count(pod: Obj) -> int:
    try:
        return int((pod["metadata"].get("annotations") or {}).get(INDEX_FAILURE_COUNT) or 0)
    except ValueError:
        return 0


def _index_failures(job: Obj, pods: list[Obj]) -> dict[int, int]:
    """Failures counted so far per index (`job-index-failure-count` of its latest pod, plus
    one when that pod failed and the pod failure policy does not ignore it)."""
    counts: dict[int, int] = {}
    for pod in pods:
        index = _index(pod)
        if index is None:
            continue
        count = _failure_count(pod)
        if (pod.get("status") or {}).get("phase") == "Failed" and match_failure_policy(
                job["spec"].get("podFailurePolicy"), pod)[0] != "Ignore":
            count += 1
        counts[index] = max(counts.get(index, 0), count)
    return counts


def _ensure_condition(conditions: list[Obj], type_: str, status: str,
                      reason: tuple[str, str], now: float) -> bool:
    """`ensureJobConditionStatus`: set the condition `type_` to `status` with `reason`
    (new transition times when any of them changes); a missing condition is not added as
    False. Returns whether the list changed."""
    stamp = rfc3339(now)
    wanted = {"type": type_, "status": status, "reason": reason[0], "message": reason[1],
              "lastProbeTime": stamp, "lastTransitionTime": stamp}
    for cond in conditions:
        if cond.get("type") != type_:
            continue
        if (cond.get("status"), cond.get("reason"), cond.get("message")) == (status, *reason):
            return False
        cond.clear()
        cond.update(wanted)
        return True
    if status == "False":
        return False
    conditions.append(wanted)
    return True


def _set(conditions: list[Obj], type_: str, reason: tuple[str, str], now: float) -> None:
    for cond in conditions:
        if cond.get("type") == type_:
            return
    stamp = rfc3339(now)
    conditions.append({"type": type_, "status": "True", "reason": reason[0],
                       "message": reason[1], "lastProbeTime": stamp,
                       "lastTransitionTime": stamp})
