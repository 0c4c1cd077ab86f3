"""What the CronJob controller decides at one instant, as pure functions
(pkg/controller/cronjob/utils.go).

`due(cj, now)` is the most recent scheduled time not yet acted on: the latest scheduled time
not after now, if it comes after the last one acted on (or the CronJob's creation) and no
earlier than `startingDeadlineSeconds` ago; with it come about how many were missed and the
next time to look. A Job
is named `<cronjob>-<scheduled minutes since the epoch>`, so one schedule time makes at most
one Job whatever happens. Finished Jobs beyond `successfulJobsHistoryLimit` /
`failedJobsHistoryLimit` are deleted oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.api.cronschedule import latest_at_or_before, next_time
from skiff.api.types import Obj
from skiff.api.wellknown import CRONJOB_SCHEDULED_ANNOTATION
from skiff.clock import parse_rfc3339, rfc3339


@dataclass(frozen=True)
class Due:
    scheduled: float | None  # the time to act on now, if any
    missed: int  # scheduled times in the window, the acted-on one included
    next_at: float  # the next scheduled time after now
    too_late: bool = False  # `scheduled` is past its startingDeadlineSeconds


def due(cj: Obj, now: float) -> Due:
    """As mostRecentScheduleTime: one step back from now for the latest time, and the number
    missed since `earliest` estimated from the schedule's first interval (exact for a fixed
    one), so a CronJob idle for days costs two steps, not one per missed time."""
    spec, status = cj["spec"], cj.get("status") or {}
    schedule, tz = str(spec["schedule"]), spec.get("timeZone")
    last = status.get("lastScheduleTime") or cj["metadata"].get("creationTimestamp")
    earliest = parse_rfc3339(last) if last else now
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None:
        earliest = max(earliest, now - float(deadline))
    next_at = next_time(schedule, tz, now)
    scheduled = latest_at_or_before(schedule, tz, now)
    if scheduled <= earliest:
        return Due(None, 0, next_at)
    first = next_time(schedule, tz, earliest)
    interval = max(next_time(schedule, tz, first) - first, 1.0)
    missed = int((scheduled - first) // interval) + 1
    too_late = deadline is not None and scheduled + float(deadline) < now
    return Due(scheduled, missed, next_at, too_late)


def job_name(cj: Obj, scheduled: float) -> str:
    return f"{cj['metadata']['name']}-{int(scheduled) // 60}"


def job_from_template(cj: Obj, scheduled: float) -> Obj:
    """getJobFromTemplate2: the template's labels, annotations and spec, the scheduled time
    annotated, owned by the CronJob."""
    template = cj["spec"].get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    meta = cj["metadata"]
    annotations = dict(tmeta.get("annotations") or {})
    annotations[CRONJOB_SCHEDULED_ANNOTATION] = rfc3339(scheduled)
    job_meta: Obj = {"name": job_name(cj, scheduled), "namespace": meta.get("namespace"),
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                          "name": meta["name"], "uid": meta["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]}
    if tmeta.get("labels"):
        job_meta["labels"] = dict(tmeta["labels"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": dict(template.get("spec") or {})}


def finished_state(job: Obj) -> str | None:
    """"Complete" or "Failed" once the Job has that condition True."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def beyond_history(cj: Obj, jobs: list[Obj]) -> list[Obj]:
    """Finished Jobs past the history limits, oldest (by start) first."""
    spec = cj["spec"]
    victims: list[Obj] = []
    for state, key, default in (("Complete", "successfulJobsHistoryLimit", 3),
                                ("Failed", "failedJobsHistoryLimit", 1)):
        limit = spec.get(key)
        limit = default if limit is None else int(limit)
        done = sorted((j for j in jobs if finished_state(j) == state),
                      key=lambda j: ((j.get("status") or {}).get("startTime") or
                                     j["metadata"].get("creationTimestamp") or "",
                                     j["metadata"]["name"]))
        victims += done[:max(len(done) - limit, 0)]
    return victims
