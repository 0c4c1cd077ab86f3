"""Job policies: the failure back-off, backoffLimitPerIndex / maxFailedIndexes,
successPolicy, and a finished Job that keeps no uncounted pods and no tracking finalizers.
The controller-manager runs with `--job-pod-failure-backoff 1s`."""

from __future__ import annotations

import datetime

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait
from tests.integration.workloads.test_job import _conditions, _job

TRACKING = "batch.kubernetes.io/job-tracking"
BASE = 1.0  # --job-pod-failure-backoff of the fixture


def _stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _finished_at(pod: Obj) -> float:
    return max(_stamp(cs["state"]["terminated"]["finishedAt"])
               for cs in pod["status"]["containerStatuses"])


def _assert_fully_counted(kube: Kube, job: Obj, name: str) -> None:
    assert not any((job["status"].get("uncountedTerminatedPods") or {}).values()), job["status"]
    _wait(lambda: not [p for p in _items(kube, "pods", "-l", f"job-name={name}")
                       if TRACKING in (p["metadata"].get("finalizers") or [])],
          what="every pod of the finished Job without the tracking finalizer")


def _indexed_job(name: str, completions: int, policy: str, script: str) -> str:
    """An Indexed Job running `sh -c script` in every index, with `policy` (YAML lines of
    the spec) added."""
    return f"""apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  completions: {completions}
  parallelism: {completions}
  completionMode: Indexed
{policy}
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - {{name: main, image: busybox, command: [sh, -c, '{script}']}}
"""


def _finished(kube: Kube, name: str, condition: str) -> Obj:
    return dict(_wait(lambda: (j := _job(kube, name)) and condition in _conditions(j) and j,
                      timeout=120, what=f"the Job {name} {condition}"))


def test_job_replaces_failed_pods_after_an_exponential_backoff(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin="""apiVersion: batch/v1
kind: Job
metadata: {name: backoff}
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: [sh, -c, "exit 1"]}]
""")
    job = _wait(lambda: (j := _job(kube, "backoff")) and "Failed" in _conditions(j) and j,
                timeout=120, what="the Job to fail with BackoffLimitExceeded")
    assert _conditions(job)["Failed"] == "BackoffLimitExceeded"
    pods = sorted(_items(kube, "pods", "-l", "job-name=backoff"),
                  key=lambda p: _stamp(p["metadata"]["creationTimestamp"]))
    assert len(pods) == 4
    for n in range(1, 4):
        gap = _stamp(pods[n]["metadata"]["creationTimestamp"]) - _finished_at(pods[n - 1])
        # base × 2^(n-1) after the n-th failure; timestamps have one-second resolution
        assert gap >= BASE * 2 ** (n - 1) - 1.0, (n, gap)
    _assert_fully_counted(kube, job, "backoff")
    kube("delete", "job", "backoff")


def test_job_backoff_limit_per_index_fails_only_that_index(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=_indexed_job(
        "perindex", 3, "  backoffLimitPerIndex: 1\n  maxFailedIndexes: 1",
        'test "$JOB_COMPLETION_INDEX" != 1'))
    job = _finished(kube, "perindex", "Failed")
    assert _conditions(job)["Failed"] == "FailedIndexes"
    assert job["status"]["failedIndexes"] == "1"
    assert job["status"]["completedIndexes"] == "0,2"
    assert job["status"]["failed"] == 2  # index 1: the first try and one retry
    one = _items(kube, "pods", "-l", "job-name=perindex,"
                 "batch.kubernetes.io/job-completion-index=1")
    assert sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"]
                  for p in one) == ["0", "1"]
    _assert_fully_counted(kube, job, "perindex")
    kube("delete", "job", "perindex")


def test_job_max_failed_indexes_exceeded_fails_the_job(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=_indexed_job(
        "maxfailed", 4, "  backoffLimitPerIndex: 0\n  maxFailedIndexes: 1",
        'if [ "$JOB_COMPLETION_INDEX" -lt 2 ]; then exit 1; fi; sleep 3600'))
    job = _finished(kube, "maxfailed", "Failed")
    assert _conditions(job)["Failed"] == "MaxFailedIndexesExceeded"
    assert job["status"]["failedIndexes"] == "0,1"
    assert not [p for p in _items(kube, "pods", "-l", "job-name=maxfailed")
                if p["status"].get("phase") == "Running"]
    kube("delete", "job", "maxfailed")


def test_job_success_policy_completes_with_success_criteria_met(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=_indexed_job(
        "leader", 3, '  successPolicy:\n    rules: [{succeededIndexes: "0"}]',
        'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then exit 0; fi; sleep 3600'))
    job = _finished(kube, "leader", "Complete")
    assert _conditions(job)["SuccessCriteriaMet"] == "SuccessPolicy"
    assert _conditions(job)["Complete"] == "SuccessPolicy"
    assert job["status"]["completedIndexes"] == "0"
    assert not [p for p in _items(kube, "pods", "-l", "job-name=leader")
                if p["status"].get("phase") == "Running"]
    _assert_fully_counted(kube, job, "leader")
    kube("delete", "job", "leader")
