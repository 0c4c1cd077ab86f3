"""A Service's EndpointSlice follows pod readiness, through a node partition (issue 16)."""

from __future__ import annotations

import json
import os
import signal
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


def test_endpointslice_drops_a_pod_of_a_partitioned_node_and_takes_it_back(
        kube: Kube) -> None:
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

    pod = _items(kube, "pods", "-l", "app=backend")[0]
    victim, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    kubelet = kube.cluster.services[f"kubelet-{node}"]
    pid = kubelet.popen.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)  # the node falls silent, as behind a partition
    try:
        eps = _wait(lambda: (e := _endpoints(kube)) and e.get(victim) is False and e,
                    what=f"{victim} on the silent node {node} to leave the ready set")
        assert sum(eps.values()) == 2
    finally:
        os.kill(pid, signal.SIGCONT)
    _wait(lambda: (e := _endpoints(kube)) and e.get(victim) is True and all(e.values()),
          what=f"{victim} back in the ready set after heal")
    kube("delete", "service", "backend")
    _wait(lambda: not _items(kube, "endpointslices", "-l",
                             "kubernetes.io/service-name=backend"),
          what="the Service's slices to be garbage collected")
    kube("delete", "deployment", "backend")
