"""CronJob (batch/v1): its schedule, defaults, validation and `kubectl get` columns.

Schedules are standard five-field cron lines (`*/5 * * * *`, names like `MON` and `JAN`,
day-of-month and day-of-week matching either when both are restricted) or the descriptors
`@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`, read in
`spec.timeZone` (an IANA name; the controller-manager's local zone, UTC here, when unset),
as Kubernetes' robfig/cron parser reads them. The cron arithmetic is croniter's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from skiff.api.errors import FieldError, invalid, not_supported, required

Obj = dict[str, Any]
Column = tuple[str, Callable[[Obj], str]]

CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
MAX_NAME_LENGTH = 52  # the Job name adds "-<minutes since the epoch>" (11 characters)


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be read."""


def _expression(schedule: str) -> str:
    text = schedule.strip()
    if text in _DESCRIPTORS:
        return _DESCRIPTORS[text]
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ScheduleError("cannot use TZ or CRON_TZ in schedule, use timeZone field "
                            "instead")
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {text}")
    expression = " ".join(f.replace("?", "*") for f in fields)
    if not croniter.is_valid(expression):
        raise ScheduleError(f"unparseable schedule: {text}")
    return expression


def zone(name: str | None) -> ZoneInfo | Any:
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name}") from None


def next_time(schedule: str, time_zone: str | None, after: float) -> float:
    """The first scheduled time strictly after `after` (epoch seconds)."""
    start = datetime.fromtimestamp(after, zone(time_zone))
    return float(croniter(_expression(schedule), start).get_next(float))


def latest_at_or_before(schedule: str, time_zone: str | None, now: float) -> float:
    """The last scheduled time not after `now` (one step back, however long ago)."""
    start = datetime.fromtimestamp(now + 0.001, zone(time_zone))
    return float(croniter(_expression(schedule), start).get_prev(float))


def times_between(schedule: str, time_zone: str | None, earliest: float, now: float,
                  *, limit: int = 101) -> list[float]:
    """Scheduled times in (earliest, now], at most `limit` of them (the latest kept)."""
    found: list[float] = []
    t = earliest
    while True:
        t = next_time(schedule, time_zone, t)
        if t > now:
            return found
        found.append(t)
        if len(found) > limit:
            del found[0]


def _default_cron_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)


def _validate_cron_job(obj: Mapping[str, Any],
                       old: Mapping[str, Any] | None) -> list[FieldError]:
    from skiff.api import workloads  # the Job rules for the template (a late import: cycle)
    errors: list[FieldError] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    if len(name) > MAX_NAME_LENGTH:
        errors.append(invalid("metadata.name", name,
                              f"must be no more than {MAX_NAME_LENGTH} characters"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [*errors, required("spec")]
    schedule = spec.get("schedule")
    if not schedule:
        errors.append(required("spec.schedule"))
    elif not isinstance(schedule, str):
        errors.append(invalid("spec.schedule", schedule, "must be a string"))
    else:
        try:
            _expression(schedule)
        except ScheduleError as err:
            errors.append(invalid("spec.schedule", schedule, str(err)))
    if spec.get("timeZone") is not None:
        try:
            zone(str(spec["timeZone"]))
        except ScheduleError as err:
            errors.append(invalid("spec.timeZone", spec["timeZone"], str(err)))
    policy = spec.get("concurrencyPolicy")
    if policy is not None and policy not in CONCURRENCY_POLICIES:
        errors.append(not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit",
                "failedJobsHistoryLimit"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            errors.append(invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    template = spec.get("jobTemplate")
    if not isinstance(template, dict):
        return [*errors, required("spec.jobTemplate")]
    job_spec = dict(template.get("spec") or {})
    given_selector = "selector" in job_spec
    job_spec.setdefault("selector", {})
    for error in workloads.validate_job_spec({"spec": job_spec}):
        if not given_selector and error.path.startswith(("spec.selector",
                                                         "spec.template.metadata.labels")):
            continue  # the apiserver gives the Job its selector when it is created
        errors.append(dataclasses.replace(
            error, path="spec.jobTemplate." + error.path))
    return errors


VALIDATORS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None],
                                list[FieldError]]] = {"CronJob": _validate_cron_job}
DEFAULTERS: dict[str, Callable[[Obj], None]] = {"CronJob": _default_cron_job}


def _last_schedule(age: Callable[[Any], str]) -> Callable[[Obj], str]:
    def column(cj: Obj) -> str:
        last = (cj.get("status") or {}).get("lastScheduleTime")
        return age(last) if last else "<none>"
    return column


def columns(meta: Callable[[str], Callable[[Obj], str]],
            age_of: Callable[[Any], str]) -> dict[str, list[Column]]:
    """kubectl's CronJob printer."""
    def spec(o: Obj) -> Obj:
        return dict(o.get("spec") or {})
    return {"CronJob": [
        ("NAME", meta("name")), ("SCHEDULE", lambda o: str(spec(o).get("schedule", ""))),
        ("TIMEZONE", lambda o: str(spec(o).get("timeZone") or "<none>")),
        ("SUSPEND", lambda o: "True" if spec(o).get("suspend") else "False"),
        ("ACTIVE", lambda o: str(len((o.get("status") or {}).get("active") or []))),
        ("LAST SCHEDULE", _last_schedule(age_of)),
        ("AGE", lambda o: age_of(o["metadata"].get("creationTimestamp")))]}


SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
