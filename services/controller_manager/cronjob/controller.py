"""The CronJob controller (pkg/controller/cronjob, the v2 controller): Jobs on a schedule.

For each CronJob it keeps `status.active` to the Jobs it owns that have not finished
(recording `SawCompletedJob` and `lastSuccessfulTime` as they finish), and when a scheduled
time has come (`plan.due`) it creates that time's Job from `jobTemplate` — unless the
CronJob is suspended, the time is past `startingDeadlineSeconds` (`MissSchedule`), or
`concurrencyPolicy: Forbid` and a Job still runs (`JobAlreadyActive`); `Replace` deletes
the running ones first. It then deletes finished Jobs beyond the history limits and looks
again at the next scheduled time.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, object_key
from skiff.clock import rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.cronjob import plan
from skiff.controller_manager.informers import controller_ref

log = logging.getLogger(__name__)

NORMAL, WARNING = "Normal", "Warning"
TOO_MANY_MISSED = 100


def _reference(job: Obj) -> Obj:
    meta = job["metadata"]
    return {"kind": "Job", "namespace": meta.get("namespace"), "name": meta["name"],
            "uid": meta.get("uid"), "apiVersion": "batch/v1",
            "resourceVersion": meta.get("resourceVersion")}


class CronJobController(Controller):
    name = "cronjob"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=5)
        self.cronjobs = context.informers.resource("cronjobs")
        self.jobs = context.informers.resource("jobs")
        self.recorder = context.recorder("cronjob-controller")
        self.cronjobs.add_handler(on_add=self._on_cronjob,
                                  on_update=lambda _o, n: self._on_cronjob(n),
                                  on_delete=self._on_cronjob)
        self.jobs.add_handler(on_add=self._on_job, on_update=lambda _o, n: self._on_job(n),
                              on_delete=self._on_job)

    def _on_cronjob(self, cj: Obj) -> None:
        self.enqueue(object_key(cj))

    def _on_job(self, job: Obj) -> None:
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") == "CronJob":
            self.enqueue(f"{job['metadata'].get('namespace')}/{ref.get('name')}")

    def _owned_jobs(self, cj: Obj) -> list[Obj]:
        uid = cj["metadata"].get("uid")
        return [j for j in self.jobs.store.by_index(BY_NAMESPACE,
                                                    str(cj["metadata"].get("namespace")))
                if (controller_ref(j) or {}).get("uid") == uid]

    async def reconcile(self, key: str) -> float | None:
        cached = self.cronjobs.store.get(key)
        if cached is None:
            return None
        cj = copy.deepcopy(cached)
        cj.setdefault("status", {})
        now = self.clock.now()
        jobs = self._owned_jobs(cj)
        await self._track_active(cj, jobs)
        after = await self._maybe_start(cj, jobs, now)
        await self._write_status(cached, cj)
        await self._trim_history(cj, jobs)
        return after

    async def _track_active(self, cj: Obj, jobs: list[Obj]) -> None:
        """status.active: a listed Job that finished leaves it (`SawCompletedJob`), one
        that is gone is dropped; a running Job it owns but never listed (`kubectl create job
        --from=cronjob/...`, or a lost status write) is reported (`UnexpectedJob`), not
        adopted; `lastSuccessfulTime` is the latest completion of any Job it owns."""
        status = cj["status"]
        listed = {ref.get("uid") for ref in status.get("active") or []}
        if any(plan.finished_state(j) is None and j["metadata"].get("uid") not in listed
               for j in jobs):
            await self._refresh_active(cj)  # our copy may just lag our own status write
            status = cj["status"]
            listed = {ref.get("uid") for ref in status.get("active") or []}
        finished: set[str] = set()
        for job in jobs:
            uid = str(job["metadata"].get("uid"))
            state = plan.finished_state(job)
            if state is None:
                if uid not in listed and not is_terminating(job):
                    await self.recorder.event(cj, WARNING, "UnexpectedJob",
                                              "Saw a job that the controller did not create "
                                              f"or forgot: {job['metadata']['name']}")
                continue
            finished.add(uid)
            if uid in listed:
                await self.recorder.event(cj, NORMAL, "SawCompletedJob",
                                          f"Saw completed job: {job['metadata']['name']}, "
                                          f"condition: {state}")
            completed = (job.get("status") or {}).get("completionTime")
            if completed and completed > str(status.get("lastSuccessfulTime") or ""):
                status["lastSuccessfulTime"] = completed
        owned = {str(j["metadata"].get("uid")) for j in jobs}
        active = [ref for ref in status.get("active") or []
                  if ref.get("uid") in owned and ref.get("uid") not in finished]
        if active:
            status["active"] = active
        else:
            status.pop("active", None)

    async def _refresh_active(self, cj: Obj) -> None:
        meta = cj["metadata"]
        try:
            fresh = await self.client.get("cronjobs", meta["name"], meta.get("namespace"))
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return
            raise
        if fresh["metadata"].get("uid") == meta.get("uid"):
            cj["status"] = dict(fresh.get("status") or {})
            meta["resourceVersion"] = fresh["metadata"].get("resourceVersion")

    async def _maybe_start(self, cj: Obj, jobs: list[Obj], now: float) -> float | None:
        spec, status = cj["spec"], cj["status"]
        if is_terminating(cj) or spec.get("suspend"):
            return None
        try:
            decision = plan.due(cj, now)
        except ValueError as err:  # an unreadable schedule stored before validation
            await self.recorder.event(cj, WARNING, "UnparseableSchedule",
                                      f"unparseable schedule: {spec.get('schedule')}: {err}")
            return None
        after = max(decision.next_at - now, 0.0) + 0.1
        if decision.scheduled is None:
            return after
        if decision.missed > TOO_MANY_MISSED:
            await self.recorder.event(cj, WARNING, "TooManyMissedTimes",
                                      f"too many missed start times: {decision.missed}. Set "
                                      "or decrease .spec.startingDeadlineSeconds or check "
                                      "clock skew")
        if decision.too_late:
            await self.recorder.event(cj, WARNING, "MissSchedule",
                                      "Missed scheduled time to start a job: "
                                      f"{rfc3339(decision.scheduled)}")
            return after
        name = plan.job_name(cj, decision.scheduled)
        if any(ref.get("name") == name for ref in status.get("active") or []) or any(
                j["metadata"]["name"] == name for j in jobs):
            return after  # this time's Job exists already
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and status.get("active"):
            await self.recorder.event(cj, NORMAL, "JobAlreadyActive",
                                      "Not starting job because prior execution is running "
                                      "and concurrency policy is Forbid")
            return after
        if policy == "Replace":
            for ref in list(status.get("active") or []):
                await self._delete_job(cj, str(ref.get("name")))
            status.pop("active", None)
        try:
            created = await self.client.create(plan.job_from_template(cj, decision.scheduled))
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                await self.recorder.event(cj, WARNING, "FailedCreate",
                                          f"Error creating job: {err.message}")
                raise
            return after
        await self.recorder.event(cj, NORMAL, "SuccessfulCreate",
                                  f"Created job {created['metadata']['name']}")
        status["active"] = [*(status.get("active") or []), _reference(created)]
        status["lastScheduleTime"] = rfc3339(decision.scheduled)
        return after

    async def _write_status(self, cached: Obj, cj: Obj) -> None:
        if (cached.get("status") or {}) == cj["status"]:
            return
        try:
            await self.client.update_status(cj)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise

    async def _trim_history(self, cj: Obj, jobs: list[Obj]) -> None:
        for job in plan.beyond_history(cj, jobs):
            await self._delete_job(cj, job["metadata"]["name"])

    async def _delete_job(self, cj: Obj, name: str) -> None:
        try:
            await self.client.delete("jobs", name, cj["metadata"].get("namespace"),
                                     propagation_policy="Background")
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return
            await self.recorder.event(cj, WARNING, "FailedDelete",
                                      f"Deleted job: {err.message}")
            raise
        await self.recorder.event(cj, NORMAL, "SuccessfulDelete", f"Deleted job {name}")
