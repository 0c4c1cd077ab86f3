"""DaemonSet and StatefulSet bodies in Kubernetes' protobuf encoding (what a typed
Go client such as client-go sends with `application/vnd.kubernetes.protobuf`) are stored as
the objects they carry, and the real kubectl reads them back. (kubectl 1.32 itself sends
these two kinds as JSON: `create -f` posts JSON, `scale`/`rollout`/`set` send patches.)"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.integration.cluster import Cluster
from tests.integration.kubectl import kubectl
from tests.integration.test_http_front import front as front  # noqa: F401 (the fixture)
from tests.unit.apiserver.test_protobuf import envelope, field, pod_template

PROTOBUF = "application/vnd.kubernetes.protobuf"


def _post(port: int, path: str, body: bytes) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     method="POST", headers={"Content-Type": PROTOBUF,
                                                             "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def test_issue16_protobuf_daemonset_and_statefulset_bodies_are_created(
        front: tuple[Cluster, int, Path]) -> None:  # noqa: F811 (the imported fixture)
    _, port, config = front
    selector = field(1, field(1, "app") + field(2, "pb-agent"))
    ds = field(1, field(1, "pb-agent") + field(3, "default")) + field(2, (
        field(1, selector) + field(2, pod_template("pb-agent"))
        + field(3, field(1, "OnDelete")) + field(4, 7)))
    assert _post(port, "/apis/apps/v1/namespaces/default/daemonsets",
                 envelope("apps/v1", "DaemonSet", ds)) == 201
    selector = field(1, field(1, "app") + field(2, "pb-db"))
    sts = field(1, field(1, "pb-db") + field(3, "default")) + field(2, (
        field(1, 0) + field(2, selector) + field(3, pod_template("pb-db")) + field(5, "pb-db")
        + field(7, field(1, "RollingUpdate") + field(2, field(1, 2)))))
    assert _post(port, "/apis/apps/v1/namespaces/default/statefulsets",
                 envelope("apps/v1", "StatefulSet", sts)) == 201

    got = json.loads(kubectl(config, "get", "daemonset", "pb-agent", "-o", "json").stdout)
    assert got["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert got["spec"]["minReadySeconds"] == 7
    assert got["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    got = json.loads(kubectl(config, "get", "statefulset", "pb-db", "-o", "json").stdout)
    assert got["spec"]["replicas"] == 0
    assert got["spec"]["serviceName"] == "pb-db"
    assert got["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert got["spec"]["selector"] == {"matchLabels": {"app": "pb-db"}}
