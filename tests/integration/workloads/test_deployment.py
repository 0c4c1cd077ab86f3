"""Deployments with the real kubectl and real kubelets."""

from __future__ import annotations

import json
import time
from typing import Any

from skiff.api.types import Obj
from tests.integration.waiting import until
from tests.integration.workloads.conftest import Kube


def _items(kube: Kube, *args: str) -> list[Obj]:
    return list(json.loads(kube("get", *args, "-o", "json").stdout)["items"])


def _ready(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or [])


def _wait(check: Any, *, timeout: float = 90.0, what: str = "") -> Any:
    return until(check, what, timeout=timeout, interval=0.5)


def test_create_deployment_with_an_image_only_ends_three_running_ready(kube: Kube) -> None:
    created = kube("create", "deployment", "web", "--image=nginx", "--replicas=3")
    assert "deployment.apps/web created" in created.stdout
    done = kube("rollout", "status", "deployment/web", "--timeout=120s")
    assert 'deployment "web" successfully rolled out' in done.stdout
    pods = _items(kube, "pods", "-l", "app=web")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Running" and _ready(p)
                                  for p in pods), pods
    row = kube("get", "deployment", "web").stdout.splitlines()
    assert row[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row[1].split()[:4] == ["web", "3/3", "3", "3"]
    sets = _items(kube, "replicasets", "-l", "app=web")
    assert len(sets) == 1
    assert sets[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert all(p["metadata"]["ownerReferences"][0]["name"] == sets[0]["metadata"]["name"]
               for p in pods)


ROLLING = """apiVersion: apps/v1
kind: Deployment
metadata: {name: roll}
spec:
  replicas: 3
  selector: {matchLabels: {app: roll}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: roll}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{name: main, image: "nginx:1.26"}]
"""


def test_set_image_rolls_with_max_surge_one_never_below_three_ready_and_undo(
        kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=ROLLING)
    kube("rollout", "status", "deployment/roll", "--timeout=120s")
    kube("set", "image", "deployment/roll", "main=nginx:1.27")
    lowest, highest = 3, 0
    deadline = time.monotonic() + 150
    while True:
        pods = _items(kube, "pods", "-l", "app=roll")
        ready = sum(1 for p in pods if _ready(p))
        lowest = min(lowest, ready)
        highest = max(highest, sum(1 for p in pods if not p["metadata"].get(
            "deletionTimestamp")))
        d = json.loads(kube("get", "deployment", "roll", "-o", "json").stdout)
        images = {c["image"] for p in pods for c in p["spec"]["containers"]}
        if d["status"].get("updatedReplicas") == 3 and d["status"].get(
                "availableReplicas") == 3 and images == {"nginx:1.27"} and len(pods) == 3:
            break
        assert time.monotonic() < deadline, d["status"]
        time.sleep(0.3)
    assert lowest >= 3, f"only {lowest} ready pods during the rollout (maxUnavailable 0)"
    assert highest <= 4, f"{highest} pods at once (maxSurge 1)"
    kube("rollout", "status", "deployment/roll", "--timeout=60s")
    history = kube("rollout", "history", "deployment/roll").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

    kube("rollout", "undo", "deployment/roll")
    _wait(lambda: {c["image"] for p in _items(kube, "pods", "-l", "app=roll")
                   for c in p["spec"]["containers"]} == {"nginx:1.26"} and len(
        _items(kube, "pods", "-l", "app=roll")) == 3, what="the undo to nginx:1.26")
    kube("rollout", "status", "deployment/roll", "--timeout=60s")
    history = kube("rollout", "history", "deployment/roll").stdout
    assert len(_items(kube, "replicasets", "-l", "app=roll")) == 2, "undo reuses revision 1's set"
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]


def test_delete_deployment_removes_its_replicasets_and_pods(kube: Kube) -> None:
    kube("create", "deployment", "gone", "--image=nginx", "--replicas=2")
    kube("rollout", "status", "deployment/gone", "--timeout=120s")
    kube("delete", "deployment", "gone")
    _wait(lambda: not _items(kube, "replicasets", "-l", "app=gone")
          and not _items(kube, "pods", "-l", "app=gone"), what="the cascade")


def test_delete_deployment_cascade_orphan_leaves_replicasets_and_pods(kube: Kube) -> None:
    kube("create", "deployment", "kept", "--image=nginx", "--replicas=2")
    kube("rollout", "status", "deployment/kept", "--timeout=120s")
    kube("delete", "deployment", "kept", "--cascade=orphan")
    assert "NotFound" in kube("get", "deployment", "kept", check=False).stderr
    sets = _wait(lambda: [rs for rs in _items(kube, "replicasets", "-l", "app=kept")
                          if not rs["metadata"].get("ownerReferences")],
                 what="the orphaned ReplicaSet")
    assert len(sets) == 1
    time.sleep(3)  # the collector had time to act; nothing may be gone
    pods = _items(kube, "pods", "-l", "app=kept")
    assert len(pods) == 2 and all(_ready(p) for p in pods)
    kube("delete", "replicaset", sets[0]["metadata"]["name"])
    _wait(lambda: not _items(kube, "pods", "-l", "app=kept"),
          what="the pods of the deleted ReplicaSet")


def test_foreground_delete_waits_for_dependents(kube: Kube) -> None:
    kube("create", "deployment", "fg", "--image=nginx", "--replicas=1")
    kube("rollout", "status", "deployment/fg", "--timeout=120s")
    kube("delete", "deployment", "fg", "--cascade=foreground", "--wait=false")
    _wait(lambda: "NotFound" in kube("get", "deployment", "fg", check=False).stderr,
          what="the foreground deletion to finish")
    assert not _items(kube, "pods", "-l", "app=fg")
    assert not _items(kube, "replicasets", "-l", "app=fg")


def test_wl1_change_cause_annotated_after_set_image_shows_in_rollout_history(kube: Kube) -> None:
    """The Deployment documentation's order: `set image`, then annotate the change cause;
    the controller copies the Deployment's annotations onto its new ReplicaSet on every
    sync, so `rollout history` shows it (it showed `<none>`)."""
    kube("create", "deployment", "cause", "--image=nginx:1.26", "--replicas=1")
    kube("rollout", "status", "deployment/cause", "--timeout=120s")
    kube("set", "image", "deployment/cause", "nginx=nginx:1.27")
    kube("annotate", "deployment/cause", "kubernetes.io/change-cause=image updated to 1.27")

    def revision_two() -> str | None:
        rows = kube("rollout", "history", "deployment/cause").stdout.splitlines()[2:]
        row = next((r for r in rows if r.split()[:1] == ["2"]), None)
        return row if row is not None and "image updated to 1.27" in row else None

    _wait(revision_two, what="revision 2's change cause in rollout history")
