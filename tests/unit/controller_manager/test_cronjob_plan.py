"""The CronJob controller's decisions at fixed instants (pkg/controller/cronjob/utils.go)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.cronschedule import ScheduleError, next_time, times_between
from skiff.api.types import Obj
from skiff.api.validation import validate
from skiff.clock import parse_rfc3339, rfc3339
from skiff.controller_manager.cronjob import plan

T0 = parse_rfc3339("2026-11-25T10:00:00Z")  # a Wednesday


def _cj(schedule: str = "*/5 * * * *", **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "report", "namespace": "ns", "uid": "u1",
                         "creationTimestamp": rfc3339(T0)},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}, **spec},
            "status": {}}


def test_wl4_cronjob_schedules_read_like_kubernetes_cron() -> None:
    assert next_time("*/5 * * * *", None, T0) == T0 + 300
    assert next_time("@hourly", None, T0) == T0 + 3600
    assert next_time("0 9 * * MON", None, T0) == parse_rfc3339("2026-11-30T09:00:00Z")
    # 10:00 in New York is 15:00 UTC in November
    assert next_time("0 10 * * *", "America/New_York", T0) == \
        parse_rfc3339("2026-11-25T15:00:00Z")
    assert times_between("*/5 * * * *", None, T0, T0 + 900) == [T0 + 300, T0 + 600, T0 + 900]
    for bad in ("* * * *", "TZ=UTC * * * * *", "61 * * * *"):
        with pytest.raises(ScheduleError):
            next_time(bad, None, T0)


def test_wl4_cronjob_due_is_the_latest_missed_time_and_a_deadline_skips_old_ones() -> None:
    cj = _cj()
    assert plan.due(cj, T0 + 100) == plan.Due(None, 0, T0 + 300)
    late = plan.due(cj, T0 + 1000)
    assert (late.scheduled, late.missed, late.next_at) == (T0 + 900, 3, T0 + 1200)
    cj["status"]["lastScheduleTime"] = rfc3339(T0 + 900)
    assert plan.due(cj, T0 + 1000).scheduled is None
    strict = _cj(startingDeadlineSeconds=30)
    assert plan.due(strict, T0 + 320).scheduled == T0 + 300
    assert plan.due(strict, T0 + 400).scheduled is None  # 300 is 100 s ago


def test_wl4_cronjob_a_scheduled_time_makes_one_job_named_after_its_minute() -> None:
    job = plan.job_from_template(_cj(), T0 + 300)
    assert job["metadata"]["name"] == f"report-{int(T0 + 300) // 60}"
    assert job["metadata"]["annotations"] == {
        "batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-11-25T10:05:00Z"}
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"


def _job(name: str, state: str, start: str) -> Obj:
    return {"metadata": {"name": name, "creationTimestamp": start},
            "status": {"startTime": start,
                       "conditions": [{"type": state, "status": "True"}]}}


def test_wl4_cronjob_history_limits_delete_the_oldest_finished_jobs() -> None:
    jobs = [_job(f"ok-{i}", "Complete", f"2026-11-25T10:0{i}:00Z") for i in range(5)] + [
        _job(f"bad-{i}", "Failed", f"2026-11-25T11:0{i}:00Z") for i in range(3)]
    victims = [j["metadata"]["name"] for j in plan.beyond_history(_cj(), jobs)]
    assert victims == ["ok-0", "ok-1", "bad-0", "bad-1"]
    kept_all = _cj(successfulJobsHistoryLimit=10, failedJobsHistoryLimit=10)
    assert plan.beyond_history(kept_all, jobs) == []


def test_as7_cronjob_validation_names_the_field() -> None:
    messages = [str(e) for e in validate(_cj("61 * * * *", concurrencyPolicy="Sometimes",
                                             timeZone="Mars/Olympus"))]
    assert any(m.startswith("spec.schedule: Invalid value") for m in messages), messages
    assert any(m.startswith("spec.concurrencyPolicy: Unsupported value") for m in messages)
    assert any(m.startswith("spec.timeZone: Invalid value") for m in messages)
    bad_template = _cj()
    bad_template["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert any("spec.jobTemplate.spec.template.spec.restartPolicy" in str(e)
               for e in validate(bad_template))
    assert validate(_cj()) == []
    long_name = _cj()
    long_name["metadata"]["name"] = "x" * 53
    assert any("must be no more than 52 characters" in str(e) for e in validate(long_name))


def test_wl4_a_cronjob_idle_for_days_is_due_once_at_the_latest_time_in_two_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[float] = []

    def counted(schedule: str, tz: str | None, after: float) -> float:
        steps.append(after)
        return next_time(schedule, tz, after)

    monkeypatch.setattr(plan, "next_time", counted)
    every_minute = _cj("* * * * *")
    late = plan.due(every_minute, T0 + 3 * 86400 + 30)
    assert len(steps) <= 3  # not one step per missed minute (4,320 of them)
    assert late.scheduled == T0 + 3 * 86400 and late.missed == 3 * 1440
    assert plan.due(every_minute, T0 + 60).scheduled == T0 + 60  # exactly on the minute
