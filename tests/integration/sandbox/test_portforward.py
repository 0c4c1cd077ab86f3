"""SPEC SB4 pods/portforward with the real kubectl (SPDY/3.1 tunnelled over a WebSocket)
and the official Python client (`v4.channel.k8s.io` port channels): apiserver → kubelet,
which dials the port inside the pod's network namespace — nothing on the host routes to
the pod's IP, so only a forward that enters the pod's namespace gets the answer."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import portforward

from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import SERVER, _pod, _ready, _server

FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")


@pytest.fixture
async def web_pod(sb_api: ApiClient, sb_namespace: str,
                  sandbox_cluster: SandboxCluster) -> AsyncIterator[str]:
    await sb_api.create(_pod("pf-web", sb_namespace, sandbox_cluster.nodes[1].name,
                             [_server()]))
    await _ready(sb_api, sb_namespace, "pf-web", timeout=90)
    yield "pf-web"
    await sb_api.delete("pods", "pf-web", sb_namespace)


@contextmanager
def kubectl_port_forward(cluster: SandboxCluster, *args: str) -> Iterator[
        tuple[int, list[str]]]:
    """`kubectl port-forward ...` running: (the local port it printed, its stderr lines)."""
    proc = subprocess.Popen(["kubectl", "--kubeconfig", str(cluster.kubeconfig),
                             "port-forward", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr or []), daemon=True)
    drain.start()
    try:
        assert proc.stdout is not None
        found: list[int] = []

        def first_line() -> None:
            for line in proc.stdout or []:
                match = FORWARDING.search(line)
                if match:
                    found.append(int(match.group(1)))
                    return

        reader = threading.Thread(target=first_line, daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert found, f"kubectl port-forward printed no local port: {errors}"
        yield found[0], errors
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_sb4_kubectl_port_forward_serves_http_requests_from_inside_the_pod(
        web_pod: str, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    with kubectl_port_forward(sandbox_cluster, "-n", sb_namespace, f"pod/{web_pod}",
                              ":8080") as (port, errors):
        # two connections: each is a new pair of SPDY streams on kubectl's one connection
        for _ in range(2):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
                    assert (resp.status, resp.read()) == (200, b"pf-web")
            except OSError as err:
                raise AssertionError(f"{err}; kubectl said: {errors}") from None
    assert not [e for e in errors if "error" in e.lower()], errors


def test_sb4_kubectl_port_forward_says_why_a_port_does_not_answer(
        web_pod: str, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    with kubectl_port_forward(sandbox_cluster, "-n", sb_namespace, f"pod/{web_pod}",
                              ":9") as (port, errors):
        # kubectl accepts the local connection, then closes it without an answer
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            try:
                answer = conn.recv(4096)
            except ConnectionResetError:
                answer = b""
        assert answer == b""
        deadline = time.monotonic() + 60
        while not any("error forwarding" in e for e in errors) and time.monotonic() < deadline:
            time.sleep(0.2)  # kubectl's stderr is read by another thread
    joined = "".join(errors)
    assert "error forwarding port 9 to pod" in joined, joined
    assert "connection refused" in joined.lower() and "Traceback" not in joined, joined


def test_sb4_official_client_portforward_reaches_the_pods_port(
        web_pod: str, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    api_client = k8s_config.new_client_from_config(str(sandbox_cluster.kubeconfig))
    try:
        pf = portforward(k8s.CoreV1Api(api_client).connect_get_namespaced_pod_portforward,
                         web_pod, sb_namespace, ports="8080")
        sock = pf.socket(8080)
        sock.settimeout(30)
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        sock.close()
        assert pf.error(8080) is None
        pf.websocket.close()
        pf.websocket.shutdown()  # close() skips an already closed connection's socket
    finally:
        api_client.close()
    assert answer.startswith(b"HTTP/1.0 200"), answer
    assert answer.endswith(b"\r\n\r\npf-web"), answer


async def test_sb4_port_forward_to_a_host_network_pod_dials_the_node(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    port = free_port()
    server = SERVER.replace("8080", str(port)).replace('"0.0.0.0"', '"127.0.0.1"')
    pod = _pod("pf-host", sb_namespace, sandbox_cluster.nodes[0].name, [{
        "name": "web", "image": "python", "command": ["python3", "-c", server],
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1}}])
    pod["spec"]["hostNetwork"] = True
    await sb_api.create(pod)
    await _ready(sb_api, sb_namespace, "pf-host", timeout=90)
    with kubectl_port_forward(sandbox_cluster, "-n", sb_namespace, "pod/pf-host",
                              f":{port}") as (local, _):
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
            # a host-network pod's hostname is the node's
            assert resp.read() == socket.gethostname().encode()
    await sb_api.delete("pods", "pf-host", sb_namespace)
