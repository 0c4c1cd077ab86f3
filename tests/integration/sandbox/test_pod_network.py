"""SPEC SB1/SB2 with real kubelets as root: each pod has its own network namespace and IP
from its node's podCIDR, pods on different nodes reach each other by pod IP, containers of
one pod share localhost, the hostname is the pod's, and the namespace and veth go with the
pod."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster, skiff_namespaces, veths
from tests.integration.waiting import get_or_none, wait_for

SERVER = """
import http.server, socket
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = socket.gethostname().encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""

CLIENT = """
import sys, time, urllib.request
while True:
    for url in sys.argv[1:]:
        try:
            print(url, urllib.request.urlopen(url, timeout=2).read().decode(), flush=True)
        except Exception as err:
            print(url, "ERROR", err, flush=True)
    time.sleep(0.5)
"""


def _pod(name: str, ns: str, node: str, containers: list[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": containers}}


def _server(name: str = "web") -> Obj:
    return {"name": name, "image": "python", "command": ["python3", "-c", SERVER],
            "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 1}}


async def _ready(api: ApiClient, ns: str, name: str, timeout: float = 40) -> Obj:
    async def check() -> Obj | None:
        pod = await get_or_none(api, "pods", name, ns)
        if pod is None or pod["status"].get("phase") != "Running":
            return None
        ready = [c for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"]
        return pod if ready and ready[0]["status"] == "True" else None
    pod: Obj = await wait_for(check, timeout=timeout, what=f"pod {name} Running and Ready")
    return pod


def _log(root: Path, uid: str, container: str) -> str:
    return "".join(p.read_text() for p in (root / "pods" / uid / "logs" / container).glob(
        "*.log"))


async def test_sb1_sb2_pods_on_one_node_share_port_8080_and_answer_a_pod_on_another_node(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, (a, b) = sb_namespace, sandbox_cluster.nodes
    for name in ("one", "two"):
        await sb_api.create(_pod(name, ns, a.name, [_server()]))
    one, two = await _ready(sb_api, ns, "one"), await _ready(sb_api, ns, "two")
    ips = [one["status"]["podIP"], two["status"]["podIP"]]
    cidr = ipaddress.ip_network((await sb_api.get("nodes", a.name))["spec"]["podCIDR"])
    assert ips[0] != ips[1]
    assert all(ipaddress.ip_address(ip) in cidr for ip in ips)
    assert one["status"]["podIPs"] == [{"ip": ips[0]}]

    urls = [f"http://{ip}:8080/" for ip in ips]
    client = await sb_api.create(_pod("client", ns, b.name, [{
        "name": "curl", "image": "python", "command": ["python3", "-c", CLIENT, *urls]}]))
    uid = client["metadata"]["uid"]

    async def answered() -> bool:
        text = _log(b.root, uid, "curl")
        return f"{urls[0]} one" in text and f"{urls[1]} two" in text

    await wait_for(answered, timeout=40, what="the pod on the other node to get both answers")
    netns_before = skiff_namespaces(sandbox_cluster.pod_network)
    assert f"skiff-pod-{uid}" in netns_before

    for name in ("one", "two", "client"):
        await sb_api.delete("pods", name, ns)

    async def torn_down() -> bool:
        for name in ("one", "two", "client"):
            if await get_or_none(sb_api, "pods", name, ns) is not None:
                return False
        return not [n for n in skiff_namespaces(sandbox_cluster.pod_network)
                    if n.startswith("skiff-pod-")
                    and n[len("skiff-pod-"):] in {uid, one["metadata"]["uid"],
                                                  two["metadata"]["uid"]}]

    await wait_for(torn_down, timeout=40, what="the pods and their namespaces to go")
    assert veths(sandbox_cluster.pod_network) == []


async def test_sb1_containers_of_one_pod_share_localhost_and_the_pods_hostname(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    probe = ("import socket, time, urllib.request\n"
             "while True:\n"
             "    try: print('peer', urllib.request.urlopen('http://127.0.0.1:8080/',"
             " timeout=2).read().decode(), 'me', socket.gethostname(), flush=True)\n"
             "    except Exception as e: print('ERROR', e, flush=True)\n"
             "    time.sleep(0.5)\n")
    created = await sb_api.create(_pod("pair", ns, node.name, [
        _server(), {"name": "side", "image": "python",
                    "command": ["python3", "-c", probe]}]))
    await _ready(sb_api, ns, "pair")

    async def reached() -> bool:
        return "peer pair me pair" in _log(node.root, created["metadata"]["uid"], "side")

    await wait_for(reached, timeout=30, what="the sidecar to reach its peer on localhost")
    await sb_api.delete("pods", "pair", ns)
