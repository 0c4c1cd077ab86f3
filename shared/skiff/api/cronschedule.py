"""CronJob schedules (batch/v1): when a schedule fires (its kind's rules: groups.batch).

Schedules are standard five-field cron lines (`*/5 * * * *`, names like `MON` and `JAN`,
day-of-month and day-of-week matching either when both are restricted) or the descriptors
`@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`, read in
`spec.timeZone` (an IANA name; the controller-manager's local zone, UTC here, when unset),
as Kubernetes' robfig/cron parser reads them. The cron arithmetic is croniter's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
MAX_NAME_LENGTH = 52  # the Job name adds "-<minutes since the epoch>" (11 characters)


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be read."""


def expression(schedule: str) -> str:
    """The five-field cron line `schedule` means (a descriptor expanded), or ScheduleError."""
    text = schedule.strip()
    if text in _DESCRIPTORS:
        return _DESCRIPTORS[text]
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ScheduleError("cannot use TZ or CRON_TZ in schedule, use timeZone field "
                            "instead")
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {text}")
    cron = " ".join(f.replace("?", "*") for f in fields)
    if not _croniter().is_valid(cron):
        raise ScheduleError(f"unparseable schedule: {text}")
    return cron


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
    return float(_croniter()(expression(schedule), start).get_next(float))


def latest_at_or_before(schedule: str, time_zone: str | None, now: float) -> float:
    """The last scheduled time not after `now` (one step back, however long ago)."""
    start = datetime.fromtimestamp(now + 0.001, zone(time_zone))
    return float(_croniter()(expression(schedule), start).get_prev(float))


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


def _croniter() -> Any:
    """croniter, imported on first use: it is ~15 ms of CPU, and every process that imports
    skiff.api imports this module (CronJob validation), few of them to read a schedule."""
    from croniter import croniter

    return croniter
