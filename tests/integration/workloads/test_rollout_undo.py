"""`kubectl rollout undo` twice on a DaemonSet and a StatefulSet (SPEC WL2, WL3): the
revision an undo restores becomes the newest in `rollout history`, so the second undo goes
back to the template before it, as in Kubernetes."""

from __future__ import annotations

import json

import pytest

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _wait

MANIFESTS = {
    "daemonset": """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: undo-ds}
spec:
  selector: {matchLabels: {app: undo-ds}}
  template:
    metadata: {labels: {app: undo-ds}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: "fluentd:1"}]
""",
    "statefulset": """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: undo-sts}
spec:
  replicas: 0
  serviceName: undo-sts
  selector: {matchLabels: {app: undo-sts}}
  template:
    metadata: {labels: {app: undo-sts}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: "fluentd:1"}]
""",
}


def _history(kube: Kube, ref: str) -> list[str]:
    out = kube("rollout", "history", ref).stdout
    return [line.split()[0] for line in out.splitlines()[2:] if line.strip()]


def _image(kube: Kube, ref: str) -> str:
    obj = json.loads(kube("get", ref, "-o", "json").stdout)
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


@pytest.mark.parametrize("kind", ["daemonset", "statefulset"])
def test_wl2_wl3_second_rollout_undo_goes_back_again(kube: Kube, kind: str) -> None:
    name = f"undo-{'ds' if kind == 'daemonset' else 'sts'}"
    ref = f"{kind}/{name}"
    kube("apply", "-f", "-", stdin=MANIFESTS[kind])
    _wait(lambda: _history(kube, ref) == ["1"], what="revision 1")
    kube("set", "image", ref, "main=fluentd:2")
    _wait(lambda: _history(kube, ref) == ["1", "2"], what="revisions 1 and 2")
    kube("rollout", "undo", ref)
    assert _image(kube, ref) == "fluentd:1"
    _wait(lambda: _history(kube, ref) == ["2", "3"], what="the restored revision as 3")
    kube("rollout", "undo", ref)
    assert _image(kube, ref) == "fluentd:2"
    _wait(lambda: _history(kube, ref) == ["3", "4"], what="the restored revision as 4")
    kube("delete", kind, name)
