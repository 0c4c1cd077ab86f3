"""Deployment progress deadline, revision history limit and describe."""

from __future__ import annotations

import json

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait

STUCK = """apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck}
spec:
  replicas: 1
  progressDeadlineSeconds: 4
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox
        command: [sleep, "3600"]
        readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}
"""


def test_progress_deadline_exceeded_is_reported_and_rollout_status_fails(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=STUCK)
    _wait(lambda: any(c.get("reason") == "ProgressDeadlineExceeded" and c["status"] == "False"
                      for c in json.loads(kube("get", "deployment", "stuck", "-o", "json")
                                          .stdout).get("status", {}).get("conditions") or []),
          what="Progressing=False ProgressDeadlineExceeded")
    status = kube("rollout", "status", "deployment/stuck", "--timeout=30s", check=False)
    assert status.returncode != 0
    assert "exceeded its progress deadline" in status.stderr
    described = kube("describe", "deployment", "stuck").stdout
    assert "ProgressDeadlineExceeded" in described and "NewReplicaSet:" in described
    kube("delete", "deployment", "stuck")


def test_revision_history_limit_prunes_old_replicasets_and_restart_rolls(kube: Kube) -> None:
    kube("create", "deployment", "hist", "--image=nginx:1", "--replicas=1")
    kube("patch", "deployment", "hist", "--type=merge", "-p",
         '{"spec":{"revisionHistoryLimit":1}}')
    for tag in ("2", "3"):
        kube("set", "image", "deployment/hist", f"nginx=nginx:{tag}")
        kube("rollout", "status", "deployment/hist", "--timeout=120s")
    _wait(lambda: len(_items(kube, "replicasets", "-l", "app=hist")) == 2,
          what="only one old ReplicaSet kept")
    before = {p["metadata"]["uid"] for p in _items(kube, "pods", "-l", "app=hist")}
    kube("rollout", "restart", "deployment/hist")
    kube("rollout", "status", "deployment/hist", "--timeout=120s")
    after = {p["metadata"]["uid"] for p in _items(kube, "pods", "-l", "app=hist")
             if not p["metadata"].get("deletionTimestamp")}
    assert after and not after & before
    kube("delete", "deployment", "hist")
