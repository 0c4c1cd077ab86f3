"""Jobs: podFailurePolicy ignores a pod killed by preemption; completions; Indexed; TTL."""

from __future__ import annotations

import json

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait

JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  backoffLimit: 0
  podFailurePolicy:
    rules:
    - {action: Ignore, onPodConditions: [{type: DisruptionTarget}]}
    - {action: FailJob, onExitCodes: {containerName: main, operator: In, values: [42]}}
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox
        command: [sh, -c, "sleep 8"]
        resources: {requests: {cpu: 1500m}}
"""

PREEMPTOR = """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000000
---
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priorityClassName: urgent
  terminationGracePeriodSeconds: 1
  nodeSelector: {kubernetes.io/hostname: NODE}
  containers:
  - {name: main, image: nginx, resources: {requests: {cpu: 1500m}}}
"""


def _job(kube: Kube, name: str) -> Obj:
    return dict(json.loads(kube("get", "job", name, "-o", "json").stdout))


def _conditions(job: Obj) -> dict[str, str]:
    return {c["type"]: c.get("reason", "") for c in job.get("status", {}).get("conditions")
            or [] if c.get("status") == "True"}


def test_job_pod_failure_policy_ignores_a_pod_killed_by_preemption_and_completes(
        kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=JOB)
    first = _wait(lambda: [p for p in _items(kube, "pods", "-l", "job-name=batch")
                           if p["status"].get("phase") == "Running"],
                  what="the job's pod running")[0]
    node = first["spec"]["nodeName"]
    kube("apply", "-f", "-", stdin=PREEMPTOR.replace("NODE", node))
    _wait(lambda: "Complete" in _conditions(_job(kube, "batch")), timeout=120,
          what="the Job to complete after the preempted pod was replaced")
    job = _job(kube, "batch")
    assert job["status"]["succeeded"] == 1
    assert job["status"]["failed"] == 0, "the preempted pod was counted against backoffLimit"
    assert "Failed" not in _conditions(job)
    row = kube("get", "job", "batch").stdout.splitlines()
    assert row[0].split()[:4] == ["NAME", "STATUS", "COMPLETIONS", "DURATION"]
    assert row[1].split()[:3] == ["batch", "Complete", "1/1"]
    kube("delete", "pod", "urgent", "--wait=false")
    kube("delete", "job", "batch")


def test_job_fail_job_rule_and_backoff_limit(kube: Kube) -> None:
    failing = JOB.replace("name: batch", "name: exit42").replace('"sleep 8"', '"exit 42"').replace(
        "cpu: 1500m", "cpu: 10m")
    kube("apply", "-f", "-", stdin=failing)
    _wait(lambda: _conditions(_job(kube, "exit42")).get("Failed") == "PodFailurePolicy",
          what="Failed by the FailJob rule")
    counting = JOB.replace("name: batch", "name: crash").replace('"sleep 8"', '"exit 1"').replace(
        "backoffLimit: 0", "backoffLimit: 1").replace("cpu: 1500m", "cpu: 10m")
    kube("apply", "-f", "-", stdin=counting)
    _wait(lambda: _conditions(_job(kube, "crash")).get("Failed") == "BackoffLimitExceeded",
          what="Failed with BackoffLimitExceeded")
    assert _job(kube, "crash")["status"]["failed"] == 2


INDEXED = """apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 3
  parallelism: 2
  completionMode: Indexed
  ttlSecondsAfterFinished: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: [sh, -c, 'echo "index $JOB_COMPLETION_INDEX"']}
"""


def test_indexed_job_completes_every_index_then_ttl_deletes_it(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=INDEXED)
    job = _wait(lambda: (j := _job(kube, "indexed")) and "Complete" in _conditions(j) and j,
                what="the Indexed Job to complete")
    assert job["status"]["completedIndexes"] == "0-2"
    assert job["status"]["succeeded"] == 3
    _wait(lambda: "NotFound" in kube("get", "job", "indexed", check=False).stderr,
          what="ttlSecondsAfterFinished to delete the Job")
    _wait(lambda: not _items(kube, "pods", "-l", "job-name=indexed"),
          what="the Job's pods garbage collected")


def test_job_active_deadline_seconds_fails_it_with_deadline_exceeded(kube: Kube) -> None:
    slow = JOB.replace("name: batch", "name: slow").replace('"sleep 8"', '"sleep 3600"') \
        .replace("cpu: 1500m", "cpu: 10m").replace("backoffLimit: 0",
                                                   "backoffLimit: 0\n  activeDeadlineSeconds: 3")
    kube("apply", "-f", "-", stdin=slow)
    _wait(lambda: _conditions(_job(kube, "slow")).get("Failed") == "DeadlineExceeded",
          what="Failed with DeadlineExceeded")
    _wait(lambda: not [p for p in _items(kube, "pods", "-l", "job-name=slow")
                       if p["status"].get("phase") == "Running"],
          what="the job's pods stopped")
