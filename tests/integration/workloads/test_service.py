"""A Service's EndpointSlice lists its ready pods; kubectl shows it (issue 16)."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait

Obj = dict[str, Any]

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
