"""SPEC JN1 in the compose cluster (kind's layout): what the DO2 test's cluster checks about
pods — own IPs from each node's podCIDR, two replicas on one node both on 8080, a pod on
node-1 reaching a pod on node-2 by pod IP and through a Service name (cluster IP and
cluster DNS), containers of one pod talking over localhost, the documentation's
run-my-nginx Deployment and its Service (docs/, unchanged) reached by name and pod IP, and
`skiff chaos partition node-2` cutting that traffic until `heal`.

The workload is a manifest as a user applies it (`skiff apply -f`); the client pod prints
one line per request, read from its log file in node-1's container.
"""

from __future__ import annotations

import ipaddress
import json
import sys
import time
from pathlib import Path
from typing import Any

from skiff.client import ApiClient
from skiff.cluster.chaos import docker as chaos
from tests.integration.compose.conftest import ComposeProject, log, run, wait_for

NAMESPACE = "default"

# Answers GET with its hostname (the pod's), its uid and what its `localhost` backend says.
FRONT = """
import http.server, os, socket, sys, urllib.request
backend = sys.argv[1] if len(sys.argv) > 1 else ""
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{socket.gethostname()} uid={os.getuid()}"
        if backend:
            body += " " + urllib.request.urlopen(backend, timeout=2).read().decode()
        data = body.encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data)))
        self.end_headers(); self.wfile.write(data)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""

# Listens on the pod's loopback only: reachable from its own pod's containers, nobody else.
BACKEND = """
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "9")
        self.end_headers(); self.wfile.write(b"localhost")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 9000), H).serve_forever()
"""

CLIENT = """
import sys, time, urllib.request
n = 0
while True:
    n += 1
    for url in sys.argv[1:]:
        try:
            body = urllib.request.urlopen(url, timeout=2).read().decode()
            print(n, url, "OK", body, flush=True)
        except Exception as err:
            print(n, url, "ERROR", type(err).__name__, flush=True)
    time.sleep(0.5)
"""


def manifest() -> list[dict[str, Any]]:
    """Two replicas of `web` on node-1 (both on 8080), the two-container pod `far` on node-2
    (its front on 8080 asks its backend on localhost:9000), and the Service `far`."""
    probe = {"httpGet": {"port": 8080}, "periodSeconds": 1}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": NAMESPACE},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {
                      "metadata": {"labels": {"app": "web"}},
                      "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-1"},
                               "terminationGracePeriodSeconds": 1,
                               "containers": [{
                                   "name": "web", "image": "python",
                                   "command": ["python3", "-c", FRONT],
                                   "ports": [{"containerPort": 8080}],
                                   "readinessProbe": probe}]}}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "far", "namespace": NAMESPACE, "labels": {"app": "far"}},
         "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-2"},
                  "terminationGracePeriodSeconds": 1,
                  "containers": [
                      {"name": "front", "image": "python",
                       "command": ["python3", "-c", FRONT, "http://localhost:9000/"],
                       "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
                       "ports": [{"containerPort": 8080}], "readinessProbe": probe},
                      {"name": "backend", "image": "python",
                       "command": ["python3", "-c", BACKEND]}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "far", "namespace": NAMESPACE},
         "spec": {"selector": {"app": "far"},
                  "ports": [{"port": 80, "targetPort": 8080}]}},
    ]


# The documentation's own manifests that need pod IPs, applied unchanged (`image: nginx`
# runs the kubelet's stand-in, which answers HTTP on the declared port 80).
DOCS = Path(__file__).with_name("docs")
DOC_MANIFESTS = ("run-my-nginx.yaml", "nginx-svc.yaml")


def apply_file(project: ComposeProject, path: Path) -> None:
    """`skiff apply -f`, as a user would."""
    skiff = Path(sys.executable).with_name("skiff")
    run([str(skiff), "--server", f"127.0.0.1:{project.api_port}", "apply", "-f", str(path)],
        timeout=60)


def apply(project: ComposeProject, objects: list[dict[str, Any]], tmp_path: Path) -> None:
    """`skiff apply -f` of a multi-document file."""
    path = tmp_path / "jn1.yaml"
    path.write_text("\n---\n".join(json.dumps(o) for o in objects))  # JSON is YAML
    apply_file(project, path)


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or [])


async def _ready_pods(api: ApiClient, selector: str, count: int) -> list[dict[str, Any]]:
    async def check(c: ApiClient) -> list[dict[str, Any]]:
        pods = (await c.list("pods", NAMESPACE, label_selector=selector))["items"]
        ready = [p for p in pods if _ready(p) and not p["metadata"].get("deletionTimestamp")]
        return ready if len(ready) == count else []
    pods: list[dict[str, Any]] = await wait_for(api, f"{count} pod(s) {selector} Ready",
                                                check, timeout=180)
    return pods


def client_log(project: ComposeProject, uid: str) -> list[str]:
    """The client pod's output lines, from its log files in node-1's container."""
    done = project.docker("exec", project.container("node-1"), "sh", "-c",
                          f"cat /var/lib/skiff/kubelet/pods/{uid}/logs/client/*.log",
                          check=False)
    return done.stdout.splitlines()


def wait_lines(project: ComposeProject, uid: str, *, after: int, urls: list[str],
               outcome: str, what: str, timeout: float = 60, count: int = 2) -> int:
    """Wait until every url has `count` `outcome` lines (OK/ERROR) among the client's
    lines after line `after`; return the number of lines then."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = client_log(project, uid)
        fresh = lines[after:]
        if all(sum(1 for ln in fresh if f" {url} {outcome}" in ln) >= count for url in urls):
            return len(lines)
        time.sleep(1)
    raise AssertionError(f"{what}: not seen in {timeout:.0f}s; the client's last lines:\n"
                         + "\n".join(lines[-12:]))


async def check_pod_network(project: ComposeProject, api: ApiClient,
                            tmp_path: Path) -> None:
    """JN1, partition included; leaves the cluster healed."""
    t0 = time.monotonic()
    apply(project, manifest(), tmp_path)
    for name in DOC_MANIFESTS:
        apply_file(project, DOCS / name)
    nodes = {n["metadata"]["name"]: n for n in (await api.list("nodes"))["items"]}
    cidr = {name: ipaddress.ip_network(n["spec"]["podCIDR"]) for name, n in nodes.items()}

    web = await _ready_pods(api, "app=web", 2)
    ips = sorted(p["status"]["podIP"] for p in web)
    assert {p["spec"]["nodeName"] for p in web} == {"node-1"}
    assert ips[0] != ips[1], f"the two replicas share an IP: {ips}"
    assert all(ipaddress.ip_address(ip) in cidr["node-1"] for ip in ips), (ips, cidr)
    far = (await _ready_pods(api, "app=far", 1))[0]
    far_ip = far["status"]["podIP"]
    assert ipaddress.ip_address(far_ip) in cidr["node-2"], (far_ip, cidr)
    nginx = await _ready_pods(api, "run=my-nginx", 2)
    nginx_ips = sorted(p["status"]["podIP"] for p in nginx)
    assert nginx_ips[0] != nginx_ips[1], f"the documentation's replicas share {nginx_ips}"
    log(f"JN1: web replicas {ips} on node-1, far {far_ip} on node-2, the documentation's "
        f"my-nginx on {[(p['spec']['nodeName'], p['status']['podIP']) for p in nginx]} "
        f"({time.monotonic() - t0:.1f}s)")

    by_ip, by_service = f"http://{far_ip}:8080/", "http://far/"
    # the documentation's Service by name, and each of its replicas by pod IP on port 80
    docs = ["http://my-nginx/", *(f"http://{ip}/" for ip in nginx_ips)]
    urls = [by_ip, by_service, *(f"http://{ip}:8080/" for ip in ips), *docs]
    client = await api.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "client", "namespace": NAMESPACE},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "client", "image": "python",
                                 "command": ["python3", "-c", CLIENT, *urls]}]}})
    uid = client["metadata"]["uid"]
    seen = wait_lines(project, uid, after=0, urls=urls, outcome="OK",
                      what="node-1's client reaching both replicas and far", timeout=120)
    text = "\n".join(client_log(project, uid))
    # far's hostname is its own, its front runs as its securityContext says, and its two
    # containers share localhost
    assert f"{by_ip} OK far uid=1000 localhost" in text, text[-2000:]
    assert f"{by_service} OK far uid=1000 localhost" in text, text[-2000:]
    web_names = sorted(p["metadata"]["name"] for p in web)
    answered = sorted({ln.split(" OK ")[1].split()[0] for ln in text.splitlines()
                       if " OK " in ln and ":8080/ OK web-" in ln})
    assert answered == web_names, (answered, web_names)
    log(f"JN1: pod-to-pod and Service traffic flows ({time.monotonic() - t0:.1f}s)")

    log(chaos.partition("node-2", from_component=None, project=project.name))
    seen = wait_lines(project, uid, after=seen, urls=[by_ip, by_service], outcome="ERROR",
                      what="node-2's pod cut off by `chaos partition node-2`", count=1)
    log(chaos.heal("node-2", project=project.name))
    wait_lines(project, uid, after=seen, urls=[by_ip, by_service], outcome="OK",
               what="node-2's pod reachable again after `chaos heal node-2`", timeout=90)
    log(f"JN1: partition cut node-2's pod, heal restored it ({time.monotonic() - t0:.1f}s)")
