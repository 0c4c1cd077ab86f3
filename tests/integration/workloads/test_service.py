"""A Service's EndpointSlice lists its ready pods; kubectl shows it."""

from __future__ import annotations

import json

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: backend}
spec:
  replicas: 3
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: backend}}
            topologyKey: kubernetes.io/hostname
      containers: [{name: main, image: nginx}]
---
apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  selector: {app: backend}
  ports: [{port: 80, targetPort: 8080}]
"""


def _endpoints(kube: Kube) -> dict[str, bool]:
    """pod name -> ready, from the Service's EndpointSlices."""
    slices = _items(kube, "endpointslices", "-l", "kubernetes.io/service-name=backend")
    return {e["targetRef"]["name"]: e["conditions"]["ready"]
            for es in slices for e in es.get("endpoints") or []}


def test_endpointslice_lists_ready_endpoints_and_goes_with_its_service(kube: Kube) -> None:
    """(The partitioned node's pod leaving and rejoining the ready set, under a real network
    cut: tests/integration/partitions/test_endpointslice_partition.py.)"""
    kube("apply", "-f", "-", stdin=MANIFEST)
    kube("rollout", "status", "deployment/backend", "--timeout=120s")
    _wait(lambda: (eps := _endpoints(kube)) and len(eps) == 3 and all(eps.values()),
          what="three ready endpoints")
    table = kube("get", "endpointslices").stdout.splitlines()
    assert table[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert any(row.startswith("backend-") and row.split()[1:3] == ["IPv4", "8080"]
               for row in table[1:]), table
    svc = json.loads(kube("get", "service", "backend", "-o", "json").stdout)
    assert svc["spec"]["ports"][0]["protocol"] == "TCP"
    assert svc["spec"]["type"] == "ClusterIP"

    kube("delete", "service", "backend")
    _wait(lambda: not _items(kube, "endpointslices", "-l",
                             "kubernetes.io/service-name=backend"),
          what="the Service's slices to be garbage collected")
    kube("delete", "deployment", "backend")


ENDPOINTS_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: ep}
spec:
  replicas: 2
  selector: {matchLabels: {app: ep}}
  template:
    metadata: {labels: {app: ep}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: main, image: nginx, ports: [{name: http, containerPort: 8080}]}
---
apiVersion: v1
kind: Pod
metadata: {name: ep-unready, labels: {app: ep}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: [sleep, "3600"]
    ports: [{name: http, containerPort: 9090}]
    readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: ep, labels: {tier: front}}
spec:
  selector: {app: ep}
  ports: [{name: web, port: 80, targetPort: http}]
"""


def test_wl6_endpoints_v1_list_ready_and_not_ready_pods_and_go_with_their_service(
        kube: Kube) -> None:
    """The Endpoints controller: ready pods under `addresses`, a pod failing its readiness
    probe under `notReadyAddresses`, the named targetPort resolved per pod (8080 and 9090:
    two subsets), the Service's labels copied, deleted with the Service."""
    kube("apply", "-f", "-", stdin=ENDPOINTS_MANIFEST)
    kube("rollout", "status", "deployment/ep", "--timeout=120s")

    def subsets() -> list[Obj] | None:
        got = kube("get", "endpoints", "ep", "-o", "json", check=False)
        if got.returncode != 0:
            return None
        found = json.loads(got.stdout).get("subsets") or []
        counted = [(len(s.get("addresses") or []), len(s.get("notReadyAddresses") or []))
                   for s in found]
        return found if sorted(counted) == [(0, 1), (2, 0)] else None

    found = _wait(subsets, what="two ready addresses on 8080 and one not ready on 9090")
    by_port = {s["ports"][0]["port"]: s for s in found}
    assert by_port[8080]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert {a["targetRef"]["name"] for a in by_port[9090]["notReadyAddresses"]} == {
        "ep-unready"}
    assert all(a["nodeName"] and a["targetRef"]["kind"] == "Pod"
               for a in by_port[8080]["addresses"])
    endpoints = json.loads(kube("get", "endpoints", "ep", "-o", "json").stdout)
    assert endpoints["metadata"]["labels"] == {"tier": "front"}
    assert "ownerReferences" not in endpoints["metadata"]
    table = kube("get", "ep", "ep").stdout.splitlines()
    assert table[0].split() == ["NAME", "ENDPOINTS", "AGE"]
    assert table[1].split()[1].count(":8080") == 2, table  # ready addresses only

    kube("delete", "service", "ep")
    _wait(lambda: kube("get", "endpoints", "ep", check=False).returncode != 0,
          what="the Service's Endpoints to be deleted")
    kube("delete", "deployment", "ep")
    kube("delete", "pod", "ep-unready")
