"""SPEC AX7 against a whole `skiff up` cluster (as root: pods in their own network
namespaces): a sandboxed pod (no hostNetwork) runs the official `kubernetes` client
unchanged with `config.load_incluster_config()` and lists pods as its ServiceAccount, and a
pod reaches a Service's ClusterIP (from its `<NAME>_SERVICE_HOST` variables) and gets an
endpoint pod's answer, through the kubelet's service proxy."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.integration import waiting
from tests.integration.skiffcli import skiff_up

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
apiserver:
  endpointReconcileInterval: 1s
"""

@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("incluster"), config=CONFIG) as data_dir:
        yield data_dir


@pytest.fixture(scope="module")
def core(data_dir: Path) -> Iterator[client.CoreV1Api]:
    with config.new_client_from_config(config_file=str(data_dir / "kubeconfig")) as api:
        yield client.CoreV1Api(api)


def until(predicate: Any, what: str, timeout: float = 90.0) -> Any:
    return waiting.until(predicate, what, timeout, interval=0.3)


def new_namespace(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def python_pod(name: str, script: str, *, labels: dict[str, str] | None = None,
               restart: str = "Never") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(termination_grace_period_seconds=1, restart_policy=restart,
                              containers=[client.V1Container(
                                  name="main", image="python",
                                  command=[sys.executable, "-c", script])]))


def finished(core: client.CoreV1Api, name: str, ns: str) -> client.V1Pod:
    return until(lambda: (p := core.read_namespaced_pod(name, ns)).status.phase
                 in ("Succeeded", "Failed") and p, f"pod {name} to finish")


# The official client, unchanged: everything comes from the pod's environment and the
# ServiceAccount volume at /var/run/secrets/kubernetes.io/serviceaccount.
IN_CLUSTER = """
import os
from kubernetes import client, config
config.load_incluster_config()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
pods = client.CoreV1Api().list_namespaced_pod(ns)
print("host=%s:%s pods=%s" % (os.environ["KUBERNETES_SERVICE_HOST"],
                              os.environ["KUBERNETES_SERVICE_PORT"],
                              ",".join(sorted(p.metadata.name for p in pods.items))))
"""


def test_ax7_sandboxed_pod_lists_pods_with_load_incluster_config(
        core: client.CoreV1Api) -> None:
    # CI runs as root, so `skiff up` sandboxes pods (SPEC SB1); without root this test
    # fails on the pod IP check below rather than pass without a sandbox.
    ns = new_namespace(core)
    kubernetes = until(lambda: core.list_namespaced_service(
        "default", field_selector="metadata.name=kubernetes").items, "the kubernetes Service")
    assert kubernetes[0].spec.cluster_ip == "10.96.0.1"
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    rbac.create_namespaced_role(ns, client.V1Role(
        metadata=client.V1ObjectMeta(name="pod-reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])]))
    rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="default-reads-pods"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                  name="pod-reader"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default",
                                       namespace=ns)]))
    core.create_namespaced_pod(ns, python_pod("lister", IN_CLUSTER))
    done = finished(core, "lister", ns)
    log = core.read_namespaced_pod_log("lister", ns)
    assert done.status.phase == "Succeeded", log
    assert not done.spec.host_network and done.status.pod_ip != "127.0.0.1"
    assert log == "host=10.96.0.1:443 pods=lister\n"


SERVER = """
import http.server, os
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("answer from %s" % os.environ["HOSTNAME"]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", 8080), Answer).serve_forever()
"""

CURL = """
import os, time, urllib.request
url = "http://%s:%s/" % (os.environ["WEB_SERVICE_HOST"], os.environ["WEB_SERVICE_PORT_HTTP"])
deadline = time.time() + 60
while True:
    try:
        print(url, urllib.request.urlopen(url, timeout=5).read().decode())
        break
    except OSError as err:  # the endpoint may not be ready yet
        if time.time() > deadline:
            raise
        time.sleep(0.5)
"""


def test_ax7_pod_reaches_a_service_cluster_ip_and_gets_an_endpoints_answer(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    web = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(
            name="http", port=80, target_port=8080)])))
    ip = web.spec.cluster_ip
    assert ip.startswith("10.") and ip != "10.96.0.1"
    core.create_namespaced_pod(ns, python_pod("web-0", SERVER, labels={"app": "web"},
                                              restart="Always"))
    until(lambda: core.read_namespaced_pod("web-0", ns).status.pod_ip not in (None, "",
                                                                             "127.0.0.1"),
          "the web pod's own IP")
    core.create_namespaced_pod(ns, python_pod("curl", CURL))
    done = finished(core, "curl", ns)
    log = core.read_namespaced_pod_log("curl", ns)
    assert done.status.phase == "Succeeded", log
    assert log == f"http://{ip}:80/ answer from web-0\n"
