"""SPEC PS4 for ReplicationControllers, with the real kubectl and the documentation's
"ReplicationController" example (controllers/replication.yaml) unchanged: three pods, the
`describe` the page shows, scaling, a deleted pod replaced, cascading and orphaning
deletes, and `kubectl apply --prune` without `--prune-allowlist` (its default list names
ReplicationControllers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _ready, _wait

REPLICATION = """apiVersion: v1
kind: ReplicationController
metadata:
  name: nginx
spec:
  replicas: 3
  selector:
    app: nginx
  template:
    metadata:
      name: nginx
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx
        ports:
        - containerPort: 80
"""


def _running(kube: Kube, ns: str, count: int) -> bool:
    pods = _items(kube, "pods", "-n", ns, "-l", "app=nginx")
    return len(pods) == count and all(_ready(p) for p in pods)


def test_ps4_replication_controller_of_the_documentation(kube: Kube) -> None:
    ns = "rc-example"
    kube("create", "namespace", ns)
    assert "replicationcontroller/nginx created" in kube(
        "apply", "-n", ns, "-f", "-", stdin=REPLICATION).stdout
    _wait(lambda: _running(kube, ns, 3), what="three nginx pods Running and Ready")
    described = kube("describe", "replicationcontrollers/nginx", "-n", ns).stdout
    assert "Selector:     app=nginx" in described
    assert "Replicas:     3 current / 3 desired" in described
    assert "Pods Status:  3 Running / 0 Waiting / 0 Succeeded / 0 Failed" in described
    assert "replication-controller  Created pod: nginx-" in described
    pods = _items(kube, "pods", "-n", ns, "-l", "app=nginx")
    assert {(r["kind"], r["apiVersion"], r["controller"])
            for p in pods for r in p["metadata"]["ownerReferences"]} == {
        ("ReplicationController", "v1", True)}
    rc = json.loads(kube("get", "rc", "nginx", "-n", ns, "-o", "json").stdout)
    assert rc["metadata"]["labels"] == {"app": "nginx"}  # defaulted from the template
    _wait(lambda: json.loads(kube("get", "rc", "nginx", "-n", ns, "-o", "json").stdout)
          ["status"].get("availableReplicas") == 3, what="the status to count 3 available")

    # a relative PodDisruptionBudget finds its scale through the ReplicationController
    kube("create", "pdb", "nginx", "-n", ns, "--selector=app=nginx", "--max-unavailable=50%")

    def budget() -> dict[str, Any]:
        pdb = json.loads(kube("get", "pdb", "nginx", "-n", ns, "-o", "json").stdout)
        return dict(pdb.get("status") or {})

    _wait(lambda: budget().get("expectedPods") == 3, what="the PDB's expected pods")
    assert budget()["desiredHealthy"] == 1  # 3 less 50 % rounded up
    kube("delete", "pdb", "nginx", "-n", ns)

    # a deleted pod is replaced; scaling goes through the scale subresource
    kube("delete", "pod", pods[0]["metadata"]["name"], "-n", ns, "--wait=false")
    _wait(lambda: _running(kube, ns, 3) and pods[0]["metadata"]["name"] not in {
        p["metadata"]["name"] for p in _items(kube, "pods", "-n", ns, "-l", "app=nginx")},
        what="a replacement for the deleted pod")
    assert "replicationcontroller/nginx scaled" in kube(
        "scale", "rc", "nginx", "--replicas=1", "-n", ns).stdout
    _wait(lambda: _running(kube, ns, 1), what="scaled down to one pod")
    wide = kube("get", "rc", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS",
                               "IMAGES", "SELECTOR"]
    assert wide[1].split()[:4] == ["nginx", "1", "1", "1"]
    assert wide[1].split()[-1] == "app=nginx"

    # orphaning leaves the pod; a new controller adopts it; a cascading delete removes all
    kube("delete", "rc", "nginx", "-n", ns, "--cascade=orphan")
    assert len(_items(kube, "pods", "-n", ns, "-l", "app=nginx")) == 1
    kube("apply", "-n", ns, "-f", "-", stdin=REPLICATION)
    _wait(lambda: _running(kube, ns, 3), what="the orphan adopted and two more created")
    kube("delete", "rc", "nginx", "-n", ns)
    _wait(lambda: not _items(kube, "pods", "-n", ns, "-l", "app=nginx"),
          what="the pods deleted with their controller")
    kube("delete", "namespace", ns, "--wait=false")


def test_ps4_apply_prune_needs_no_allowlist(kube: Kube, tmp_path: Path) -> None:
    """kubectl's default prune list names ReplicationControllers: with them served,
    `apply --prune -l` works as on Kubernetes."""
    ns = "rc-prune"
    kube("create", "namespace", ns)
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {app: pruned}}\n")
    (tmp_path / "b.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, labels: {app: pruned}}\n")
    kube("apply", "-n", ns, "--prune", "-l", "app=pruned", "-f", str(tmp_path))
    (tmp_path / "b.yaml").unlink()
    pruned = kube("apply", "-n", ns, "--prune", "-l", "app=pruned", "-f", str(tmp_path))
    assert "configmap/b pruned" in pruned.stdout, pruned.stdout + pruned.stderr
    kube("delete", "namespace", ns, "--wait=false")


def test_ps4_replication_controller_validation(kube: Kube) -> None:
    refused = kube("apply", "-f", "-", check=False, stdin="""apiVersion: v1
kind: ReplicationController
metadata: {name: bad}
spec:
  selector: {app: one}
  template:
    metadata: {labels: {app: two}}
    spec:
      restartPolicy: OnFailure
      containers: [{name: c, image: busybox}]
""")
    assert 'The ReplicationController "bad" is invalid' in refused.stderr
    assert "`selector` does not match template `labels`" in refused.stderr
    assert ('spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported '
            'values: "Always"') in refused.stderr
    bare = kube("apply", "-f", "-", check=False, stdin="""apiVersion: v1
kind: ReplicationController
metadata: {name: bare}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
""")
    assert "spec.selector: Required value" in bare.stderr, bare.stderr
