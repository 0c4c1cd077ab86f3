"""SPEC AX7 against a whole `skiff up` cluster (as root: pods in their own network
namespaces): a sandboxed pod (no hostNetwork) runs the official `kubernetes` client
unchanged with `config.load_incluster_config()` and lists pods as its ServiceAccount, and a
pod reaches a Service's ClusterIP (from its `<NAME>_SERVICE_HOST` variables) and gets an
endpoint pod's answer, through the kubelet's service proxy. Cluster DNS: pods resolve
Services and StatefulSet pods by name (Kubernetes' DNS specification) through the resolver
of their /etc/resolv.conf, as any program in a Kubernetes pod does.

The kubelets' upstream resolver (`resolvConf`) is a file without nameservers, so no query
leaves the machine: names outside the cluster get SERVFAIL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.integration import waiting
from tests.integration.officialclient import (
    let_default_account_list_pods,
    name_of,
    phase_of,
    present,
    python_pod,
)
from tests.integration.skiffcli import skiff_up

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
  resolvConf: {resolv}
apiserver:
  endpointReconcileInterval: 1s
"""

@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("incluster")
    resolv = root / "no-upstream-resolv.conf"
    resolv.write_text("# no nameserver: nothing is forwarded off this machine\n")
    with skiff_up(root, config=CONFIG.format(resolv=resolv)) as data_dir:
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


def finished(core: client.CoreV1Api, name: str, ns: str) -> client.V1Pod:
    pod: client.V1Pod = until(lambda: phase_of(p := core.read_namespaced_pod(name, ns))
                              in ("Succeeded", "Failed") and p, f"pod {name} to finish")
    return pod


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
    let_default_account_list_pods(core, ns)
    core.create_namespaced_pod(ns, python_pod("lister", IN_CLUSTER))
    done = finished(core, "lister", ns)
    log = core.read_namespaced_pod_log("lister", ns)
    assert phase_of(done) == "Succeeded", log
    assert not present(done.spec).host_network and present(done.status).pod_ip != "127.0.0.1"
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
    ip = present(present(web.spec).cluster_ip)
    assert ip.startswith("10.") and ip != "10.96.0.1"
    core.create_namespaced_pod(ns, python_pod("web-0", SERVER, labels={"app": "web"},
                                              restart="Always"))
    until(lambda: present(core.read_namespaced_pod("web-0", ns).status).pod_ip
          not in (None, "", "127.0.0.1"),
          "the web pod's own IP")
    core.create_namespaced_pod(ns, python_pod("curl", CURL))
    done = finished(core, "curl", ns)
    log = core.read_namespaced_pod_log("curl", ns)
    assert phase_of(done) == "Succeeded", log
    assert log == f"http://{ip}:80/ answer from web-0\n"


RESOLVE = """
import socket, time, urllib.request
print(open("/etc/resolv.conf").read().strip())
for name in ("web", "web.{ns}", "web.{ns}.svc.cluster.local", "kubernetes.default"):
    print(name, socket.gethostbyname(name))
try:
    socket.gethostbyname("nosuch.{ns}.svc.cluster.local.")
    print("nosuch resolved")
except socket.gaierror as err:
    print("nosuch", "NXDOMAIN" if err.errno == socket.EAI_NONAME else err)
deadline = time.time() + 60
while True:
    try:
        print(urllib.request.urlopen("http://web/", timeout=5).read().decode())
        break
    except OSError:  # the endpoint may not be ready yet
        if time.time() > deadline:
            raise
        time.sleep(0.5)
"""


def test_cluster_dns_pod_resolves_services_by_name_and_reaches_them(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    dns = core.read_namespaced_service("kube-dns", "kube-system")
    assert present(dns.spec).cluster_ip == "10.96.0.10"
    web = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(
            name="http", port=80, target_port=8080)])))
    core.create_namespaced_pod(ns, python_pod("web-0", SERVER, labels={"app": "web"},
                                              restart="Always"))
    core.create_namespaced_pod(ns, python_pod("resolver", RESOLVE.format(ns=ns)))
    done = finished(core, "resolver", ns)
    log = core.read_namespaced_pod_log("resolver", ns)
    assert phase_of(done) == "Succeeded", log
    web_ip = present(web.spec).cluster_ip
    assert log.splitlines() == [
        f"search {ns}.svc.cluster.local svc.cluster.local cluster.local",
        "nameserver 10.96.0.10",
        "options ndots:5",
        f"web {web_ip}",
        f"web.{ns} {web_ip}",
        f"web.{ns}.svc.cluster.local {web_ip}",
        "kubernetes.default 10.96.0.1",
        "nosuch NXDOMAIN",
        "answer from web-0"]


STATEFUL = """
import socket, time, urllib.request
import dns.resolver
deadline = time.time() + 60
while True:  # until both pods are ready endpoints of the headless Service
    try:
        ips = sorted(socket.gethostbyname_ex("nginx")[2])
        if len(ips) == 2:
            break
    except OSError:
        pass
    if time.time() > deadline:
        raise SystemExit("nginx never had two endpoints")
    time.sleep(0.5)
print("nginx", " ".join(ips))
for pod in ("web-0", "web-1"):
    print(pod, socket.gethostbyname(pod + ".nginx"))
srv = dns.resolver.resolve("_web._tcp.nginx.{ns}.svc.cluster.local", "SRV")
print("srv", " ".join(sorted("%s:%d" % (r.target, r.port) for r in srv)))
print(urllib.request.urlopen("http://web-1.nginx:8080/", timeout=5).read().decode())
"""


def test_cluster_dns_statefulset_pods_resolve_under_their_headless_service(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    # The client sends a plain dict body as it is; its annotations name only the model.
    core.create_namespaced_service(ns, {  # type: ignore[arg-type]
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
        "spec": {"clusterIP": "None", "selector": {"app": "sts"},
                 "ports": [{"name": "web", "port": 8080}]}})
    client.AppsV1Api(core.api_client).create_namespaced_stateful_set(ns, {  # type: ignore[arg-type]
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"serviceName": "nginx", "replicas": 2,
                 "selector": {"matchLabels": {"app": "sts"}},
                 "template": {"metadata": {"labels": {"app": "sts"}}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "web", "image": "python",
                                     "command": ["python3", "-c", SERVER],
                                     "readinessProbe": {"tcpSocket": {"port": 8080},
                                                        "periodSeconds": 1}}]}}}})
    core.create_namespaced_pod(ns, python_pod("resolver", STATEFUL.format(ns=ns)))
    done = finished(core, "resolver", ns)
    log = core.read_namespaced_pod_log("resolver", ns)
    assert phase_of(done) == "Succeeded", log
    ips = {name_of(p): present(present(p.status).pod_ip) for p in core.list_namespaced_pod(
        ns, label_selector="app=sts").items}
    assert log.splitlines() == [
        "nginx " + " ".join(sorted(ips.values())),
        f"web-0 {ips['web-0']}",
        f"web-1 {ips['web-1']}",
        f"srv web-0.nginx.{ns}.svc.cluster.local.:8080 web-1.nginx.{ns}.svc.cluster.local.:8080",
        "answer from web-1"]
