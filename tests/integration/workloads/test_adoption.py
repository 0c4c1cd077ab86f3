"""Adoption and release (Kubernetes' ControllerRefManager): a workload controller
adopts running orphans its selector matches instead of creating new pods, and releases an
owned pod whose labels stop matching."""

from __future__ import annotations

import time

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _ready, _wait

RS = """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: keep, namespace: adopt}
spec:
  replicas: 2
  selector: {matchLabels: {app: keep}}
  template:
    metadata: {labels: {app: keep}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
"""


def _controller_uid(pod: Obj) -> str | None:
    return next((r["uid"] for r in pod["metadata"].get("ownerReferences") or []
                 if r.get("controller")), None)


def _orphan_and_recreate(kube: Kube, kind: str, name: str, namespace: str,
                         manifest: str) -> str:
    """`kubectl delete <kind> --cascade=orphan`, wait for the pods to lose their controller,
    apply the same manifest again and wait for the new object to adopt every pod; returns
    the new object's uid."""
    kube("delete", kind, name, "-n", namespace, "--cascade=orphan")
    _wait(lambda: all(_controller_uid(p) is None for p in _items(kube, "pods", "-n",
                                                                 namespace)),
          what=f"the {kind}'s pods orphaned")
    kube("apply", "-f", "-", stdin=manifest)
    uid = str(kube("get", kind, name, "-n", namespace, "-o",
                   "jsonpath={.metadata.uid}").stdout)
    _wait(lambda: all(_controller_uid(p) == uid for p in _items(kube, "pods", "-n",
                                                                namespace)),
          what=f"the orphans adopted by the new {kind}")
    return uid


def _revisions_adopted(kube: Kube, namespace: str, uid: str) -> None:
    _wait(lambda: [_controller_uid(r) for r in _items(kube, "controllerrevisions", "-n",
                                                      namespace)] == [uid],
          what="the orphaned ControllerRevision adopted (claimHistory), no second one")


def test_adoption_a_recreated_replicaset_adopts_its_orphaned_pods_and_creates_none(
        kube: Kube) -> None:
    kube("create", "namespace", "adopt")
    kube("apply", "-f", "-", stdin=RS)
    before = _wait(lambda: (ps := [p for p in _items(kube, "pods", "-n", "adopt")
                                   if _ready(p)]) and len(ps) == 2 and ps,
                   what="the ReplicaSet's 2 pods ready")
    names = {p["metadata"]["name"] for p in before}
    uid = _orphan_and_recreate(kube, "rs", "keep", "adopt", RS)
    _wait(lambda: kube("get", "rs", "keep", "-n", "adopt", "-o",
                       "jsonpath={.status.readyReplicas}").stdout == "2",
          what="the ReplicaSet to count the adopted pods ready")
    time.sleep(3)  # a controller that had not adopted would have created pods by now
    pods = _items(kube, "pods", "-n", "adopt")
    assert {p["metadata"]["name"] for p in pods} == names, "the ReplicaSet created new pods"
    assert all(r.get("blockOwnerDeletion") for p in pods
               for r in p["metadata"]["ownerReferences"])
    events = kube("get", "events", "-n", "adopt", "--field-selector",
                  f"involvedObject.uid={uid}", "-o", "jsonpath={.items[*].reason}").stdout
    assert "SuccessfulCreate" not in events

    # Release: a pod relabelled out of the selector loses its controller reference and the
    # set replaces it.
    victim = sorted(names)[0]
    kube("label", "pod", victim, "-n", "adopt", "app=other", "--overwrite")
    _wait(lambda: _controller_uid(_items(kube, "pods", "-n", "adopt", "-l", "app=other")[0])
          is None, what="the relabelled pod released")
    _wait(lambda: len([p for p in _items(kube, "pods", "-n", "adopt", "-l", "app=keep")
                       if _controller_uid(p) == uid]) == 2,
          what="a replacement for the released pod")
    kube("delete", "namespace", "adopt", "--wait=false")


def test_adoption_a_recreated_daemonset_adopts_its_orphaned_pods(kube: Kube) -> None:
    ds = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: adopt-ds}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
"""
    kube("create", "namespace", "adopt-ds")
    kube("apply", "-f", "-", stdin=ds)
    nodes = len(_items(kube, "nodes"))
    before = _wait(lambda: (ps := [p for p in _items(kube, "pods", "-n", "adopt-ds")
                                   if _ready(p)]) and len(ps) == nodes and ps,
                   what="one daemon pod per node")
    uid = _orphan_and_recreate(kube, "ds", "agent", "adopt-ds", ds)
    _revisions_adopted(kube, "adopt-ds", uid)
    time.sleep(3)
    assert {p["metadata"]["name"] for p in _items(kube, "pods", "-n", "adopt-ds")} == {
        p["metadata"]["name"] for p in before}
    kube("delete", "namespace", "adopt-ds", "--wait=false")


def test_adoption_a_recreated_deployment_adopts_its_orphaned_replicaset(kube: Kube) -> None:
    kube("create", "namespace", "adopt-deploy")
    kube("create", "deployment", "web", "-n", "adopt-deploy", "--image=nginx",
         "--replicas=2")
    kube("rollout", "status", "deployment/web", "-n", "adopt-deploy", "--timeout=120s")
    [rs] = _items(kube, "rs", "-n", "adopt-deploy")
    pods = {p["metadata"]["uid"] for p in _items(kube, "pods", "-n", "adopt-deploy")}
    kube("delete", "deployment", "web", "-n", "adopt-deploy", "--cascade=orphan")
    _wait(lambda: all(_controller_uid(r) is None
                      for r in _items(kube, "rs", "-n", "adopt-deploy")),
          what="the ReplicaSet orphaned")
    kube("create", "deployment", "web", "-n", "adopt-deploy", "--image=nginx",
         "--replicas=2")
    uid = kube("get", "deployment", "web", "-n", "adopt-deploy", "-o",
               "jsonpath={.metadata.uid}").stdout
    _wait(lambda: [_controller_uid(r) for r in _items(kube, "rs", "-n", "adopt-deploy")]
          == [uid], what="the orphaned ReplicaSet adopted by the new Deployment")
    kube("rollout", "status", "deployment/web", "-n", "adopt-deploy", "--timeout=120s")
    time.sleep(3)
    assert [r["metadata"]["uid"] for r in _items(kube, "rs", "-n", "adopt-deploy")] == [
        rs["metadata"]["uid"]], "the Deployment made a new ReplicaSet"
    assert {p["metadata"]["uid"] for p in _items(kube, "pods", "-n", "adopt-deploy")} == pods
    kube("delete", "namespace", "adopt-deploy", "--wait=false")


def test_adoption_a_recreated_statefulset_adopts_its_orphaned_pods(kube: Kube) -> None:
    sts = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: adopt-sts}
spec:
  replicas: 2
  serviceName: db
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
"""
    kube("create", "namespace", "adopt-sts")
    kube("apply", "-f", "-", stdin=sts)
    _wait(lambda: len([p for p in _items(kube, "pods", "-n", "adopt-sts") if _ready(p)]) == 2,
          what="the StatefulSet's 2 pods ready")
    pods = {p["metadata"]["uid"] for p in _items(kube, "pods", "-n", "adopt-sts")}
    uid = _orphan_and_recreate(kube, "sts", "db", "adopt-sts", sts)
    _revisions_adopted(kube, "adopt-sts", uid)
    _wait(lambda: kube("get", "sts", "db", "-n", "adopt-sts", "-o",
                       "jsonpath={.status.readyReplicas}").stdout == "2",
          what="the StatefulSet to count its adopted pods ready")
    assert {p["metadata"]["uid"] for p in _items(kube, "pods", "-n", "adopt-sts")} == pods
    kube("delete", "namespace", "adopt-sts", "--wait=false")
