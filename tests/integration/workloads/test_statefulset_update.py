"""StatefulSet updates: RollingUpdate with partition, ControllerRevisions, rollout restart."""

from __future__ import annotations

import json

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _ready, _wait

MANIFEST = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 1}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: "postgres:16"}]
"""


def _images(kube: Kube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
            for p in _items(kube, "pods", "-l", "app=db")
            if not p["metadata"].get("deletionTimestamp")}


def _sts(kube: Kube) -> Obj:
    return dict(json.loads(kube("get", "statefulset", "db", "-o", "json").stdout))


def test_statefulset_rolling_update_with_partition_then_all_then_restart(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=MANIFEST)
    kube("rollout", "status", "statefulset/db", "--timeout=120s")
    first = _sts(kube)["status"]
    assert first["currentRevision"] == first["updateRevision"]

    kube("set", "image", "statefulset/db", "main=postgres:17")
    _wait(lambda: _images(kube) == {"db-0": "postgres:16", "db-1": "postgres:17",
                                    "db-2": "postgres:17"}
          and all(_ready(p) for p in _items(kube, "pods", "-l", "app=db")),
          what="ordinals at and above the partition updated")
    status = _sts(kube)["status"]
    assert status["updatedReplicas"] == 2
    assert status["currentRevision"] == first["currentRevision"] != status["updateRevision"]

    kube("patch", "statefulset", "db", "--type=merge", "-p",
         '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}')
    _wait(lambda: set(_images(kube).values()) == {"postgres:17"} and len(_images(kube)) == 3,
          what="every ordinal updated")
    kube("rollout", "status", "statefulset/db", "--timeout=120s")
    done = _sts(kube)["status"]
    assert done["currentRevision"] == done["updateRevision"]
    revisions = _items(kube, "controllerrevisions", "-l", "app=db")
    assert sorted(r["revision"] for r in revisions) == [1, 2]

    before = {p["metadata"]["name"]: p["metadata"]["uid"]
              for p in _items(kube, "pods", "-l", "app=db")}
    kube("rollout", "restart", "statefulset/db")
    _wait(lambda: (now := {p["metadata"]["name"]: p["metadata"]["uid"]
                           for p in _items(kube, "pods", "-l", "app=db")
                           if _ready(p)}) and len(now) == 3
          and all(now[n] != before[n] for n in before),
          timeout=150, what="every pod restarted")
    kube("delete", "statefulset", "db")
