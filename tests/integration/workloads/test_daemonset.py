"""A DaemonSet puts one pod on every node and keeps it through a partition."""

from __future__ import annotations

import json
import os
import signal
import time

from tests.integration.workloads.conftest import NODES, Kube
from tests.integration.workloads.test_deployment import _items, _ready, _wait

MANIFEST = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: fluentd}]
"""


def test_daemonset_one_pod_per_node_kept_through_a_node_partition(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=MANIFEST)
    pods = _wait(lambda: (ps := _items(kube, "pods", "-l", "app=agent")) and len(ps) == 3
                 and all(_ready(p) for p in ps) and ps, what="a ready daemon pod per node")
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(NODES)
    row = kube("get", "daemonset", "agent").stdout.splitlines()
    assert row[0].split()[:6] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                                  "AVAILABLE"]
    _wait(lambda: kube("get", "daemonset", "agent").stdout.splitlines()[1].split()[1:6]
          == ["3", "3", "3", "3", "3"], what="the DaemonSet status")
    tolerations = pods[0]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute"} in tolerations

    victim = pods[0]
    node = victim["spec"]["nodeName"]
    popen = kube.cluster.services[f"kubelet-{node}"].popen
    assert popen is not None  # the kubelet is running
    pid = popen.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        _wait(lambda: any(t.get("key") == "node.kubernetes.io/unreachable"
                          and t.get("effect") == "NoExecute"
                          for t in json.loads(kube("get", "node", node, "-o", "json").stdout)
                          ["spec"].get("taints") or []),
              what=f"the unreachable NoExecute taint on {node}")
        time.sleep(3)  # the taint manager had time to evict what does not tolerate it
        still = json.loads(kube("get", "pod", victim["metadata"]["name"], "-o",
                                "json").stdout)
        assert not still["metadata"].get("deletionTimestamp")
        assert len(_items(kube, "pods", "-l", "app=agent")) == 3
    finally:
        os.kill(pid, signal.SIGCONT)
    _wait(lambda: all(_ready(p) for p in _items(kube, "pods", "-l", "app=agent")),
          what="the daemon pods ready after heal")
    kube("delete", "daemonset", "agent")
    _wait(lambda: not _items(kube, "pods", "-l", "app=agent"), what="the daemon pods gone")


def test_daemonset_rolling_update_replaces_one_node_at_a_time(kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=MANIFEST.replace("agent", "roller"))
    _wait(lambda: len([p for p in _items(kube, "pods", "-l", "app=roller") if _ready(p)]) == 3,
          what="three ready daemon pods")
    kube("set", "image", "daemonset/roller", "main=fluentd:2")
    lowest = 3
    deadline = time.monotonic() + 120
    while True:
        pods = _items(kube, "pods", "-l", "app=roller")
        lowest = min(lowest, sum(1 for p in pods if _ready(p)))
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(live) == 3 and all(_ready(p) and p["spec"]["containers"][0]["image"] ==
                                  "fluentd:2" for p in live):
            break
        assert time.monotonic() < deadline, "the rolling update did not finish"
        time.sleep(0.3)
    assert lowest >= 2, "more than maxUnavailable=1 daemon pods were down at once"
    assert sorted(p["spec"]["nodeName"] for p in live) == sorted(NODES)
    history = kube("rollout", "history", "daemonset/roller").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    kube("delete", "daemonset", "roller")
    _wait(lambda: not _items(kube, "controllerrevisions", "-l", "app=roller"),
          what="the DaemonSet's revisions garbage collected")
