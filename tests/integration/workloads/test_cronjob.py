"""CronJob with the real kubectl: `kubectl create cronjob`, `kubectl create job
--from=cronjob/...`, and a Job created at the next minute by the cronjob controller, seen
finished in the CronJob's status and events."""

from __future__ import annotations

import json

from skiff.clock import rfc3339
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait


def test_wl4_cronjob_creates_a_job_each_scheduled_minute_and_records_it(kube: Kube) -> None:
    ns = "cron"
    kube("create", "namespace", ns)
    kube("create", "cronjob", "hello", "-n", ns, "--image=busybox", "--schedule=* * * * *",
         "--", "echo", "hello from cron")
    table = kube("get", "cronjobs", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE",
                                "LAST", "SCHEDULE", "AGE"]
    assert table[1].split()[:7] == ["hello", "*", "*", "*", "*", "*", "<none>"]

    kube("create", "job", "manual", "-n", ns, "--from=cronjob/hello")
    _wait(lambda: kube("get", "job", "manual", "-n", ns, "-o",
                       "jsonpath={.status.succeeded}").stdout == "1", what="the manual job")
    assert kube("logs", "job/manual", "-n", ns).stdout == "hello from cron\n"

    def scheduled() -> list[str]:
        return [j["metadata"]["name"] for j in _items(kube, "jobs", "-n", ns)
                if j["metadata"]["name"].startswith("hello-")]

    names = _wait(scheduled, timeout=90, what="the job of the next scheduled minute")
    minutes = int(names[0].removeprefix("hello-"))
    job = json.loads(kube("get", "job", names[0], "-n", ns, "-o", "json").stdout)
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert stamp == rfc3339(minutes * 60)  # named after the minute it was scheduled for
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"

    def recorded() -> dict[str, str] | None:
        status = json.loads(kube("get", "cronjob", "hello", "-n", ns, "-o",
                                 "json").stdout).get("status") or {}
        return status if status.get("lastSuccessfulTime") and not status.get("active") \
            else None

    status = _wait(recorded, what="the finished job recorded in the CronJob's status")
    assert status["lastScheduleTime"] >= stamp  # (or a later minute's, if one came)
    reasons = kube("get", "events", "-n", ns, "--field-selector",
                   "involvedObject.kind=CronJob", "-o", "jsonpath={.items[*].reason}").stdout
    assert "SuccessfulCreate" in reasons and "SawCompletedJob" in reasons
    kube("delete", "cronjob", "hello", "-n", ns)
    _wait(lambda: not scheduled(), what="the CronJob's jobs collected with it")
    kube("delete", "namespace", ns, "--wait=false")
