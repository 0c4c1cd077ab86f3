"""SPEC SB4 with the real kubectl and the official Python client: pods/exec goes apiserver
→ kubelet → the pod's namespaces, with the container's env and working dir, stdin, the
exit code as kubectl reports it, and `kubectl cp`; SB2 seen through it: a pod on one node
reaches pods on another node at podIP:8080."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import stream

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import SERVER, _pod, _ready, _server


def _shell(name: str = "main", **extra: Any) -> Obj:
    return {"name": name, "image": "python", "workingDir": "/tmp",
            "env": [{"name": "GREETING", "value": "hello"},
                    {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "command": ["python3", "-c", SERVER],
            "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 1}, **extra}


@pytest.fixture
async def shell_pod(sb_api: ApiClient, sb_namespace: str,
                    sandbox_cluster: SandboxCluster) -> AsyncIterator[Obj]:
    node = sandbox_cluster.nodes[0]
    await sb_api.create(_pod("shell", sb_namespace, node.name, [_shell()]))
    yield await _ready(sb_api, sb_namespace, "shell")
    await sb_api.delete("pods", "shell", sb_namespace)


async def test_sb4_kubectl_exec_prints_output_and_returns_the_exit_code(
        shell_pod: Obj, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ran = sandbox_cluster.kubectl("exec", "-n", sb_namespace, "shell", "--", "sh", "-c",
                                  'echo "$GREETING from $(hostname) in $(pwd)"; exit 3')
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout == "hello from shell in /tmp\n"
    assert "command terminated with exit code 3" in ran.stderr
    fed = sandbox_cluster.kubectl("exec", "-i", "-n", sb_namespace, "shell", "--", "cat",
                                  stdin="through stdin\n")
    assert (fed.returncode, fed.stdout) == (0, "through stdin\n"), fed.stderr
    own = sandbox_cluster.kubectl("exec", "-n", sb_namespace, "shell", "--", "sh", "-c",
                                  'echo "$MY_IP"')
    assert own.stdout.strip() == shell_pod["status"]["podIP"]
    # inside the pod's network namespace: its own IP, and the server on localhost
    ip = sandbox_cluster.kubectl(
        "exec", "-n", sb_namespace, "shell", "--", "python3", "-c",
        "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080').read()"
        ".decode())")
    assert (ip.returncode, ip.stdout) == (0, "shell\n"), ip.stderr


async def test_sb4_exec_errors_are_kubernetes_shaped(
        shell_pod: Obj, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    wrong = sandbox_cluster.kubectl("exec", "-n", sb_namespace, "shell", "-c", "nope", "--",
                                    "true")
    assert wrong.returncode == 1
    assert "container nope is not valid for pod shell" in wrong.stderr
    assert "Traceback" not in wrong.stderr


async def test_sb4_kubectl_cp_copies_a_file_in_and_out(
        shell_pod: Obj, sb_namespace: str, sandbox_cluster: SandboxCluster,
        tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("copied through tar over exec\n")
    inside = "/tmp/inside.txt"  # the container's own /tmp (AU8), not the node's
    copied_in = sandbox_cluster.kubectl("cp", str(source), f"{sb_namespace}/shell:{inside}")
    assert copied_in.returncode == 0, copied_in.stderr
    back = tmp_path / "back.txt"
    copied_out = sandbox_cluster.kubectl("cp", f"{sb_namespace}/shell:{inside}", str(back))
    assert copied_out.returncode == 0, copied_out.stderr
    assert back.read_text() == "copied through tar over exec\n"


async def test_sb4_official_client_stream_exec_returns_the_output(
        shell_pod: Obj, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    api_client = k8s_config.new_client_from_config(str(sandbox_cluster.kubeconfig))
    try:
        resp = stream(k8s.CoreV1Api(api_client).connect_get_namespaced_pod_exec, "shell",
                      sb_namespace, command=["sh", "-c", "echo streamed; hostname; exit 4"],
                      stderr=True, stdin=False, stdout=True, tty=False,
                      _preload_content=False)
        try:
            resp.run_forever(timeout=30)
            out, code = resp.read_stdout(), resp.returncode
        finally:
            resp.close()
            resp.sock.sock.close()  # the client leaves its socket to the GC otherwise
    finally:
        api_client.close()
    assert (out, code) == ("streamed\nshell\n", 4)


async def test_sb2_a_pod_on_another_node_gets_each_answer_through_kubectl_exec(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, (a, b) = sb_namespace, sandbox_cluster.nodes
    for name in ("one", "two"):
        await sb_api.create(_pod(name, ns, a.name, [_server()]))
    await sb_api.create(_pod("third", ns, b.name, [_shell()]))
    ips = [(await _ready(sb_api, ns, n))["status"]["podIP"] for n in ("one", "two")]
    await _ready(sb_api, ns, "third")
    for ip, name in zip(ips, ("one", "two"), strict=True):
        got = sandbox_cluster.kubectl(
            "exec", "-n", ns, "third", "--", "python3", "-c",
            f"import urllib.request;print(urllib.request.urlopen('http://{ip}:8080',"
            "timeout=5).read().decode())")
        assert (got.returncode, got.stdout) == (0, f"{name}\n"), got.stderr
    for name in ("one", "two", "third"):
        await sb_api.delete("pods", name, ns)


async def test_sb4_kubectl_exec_it_gets_a_terminal_of_the_callers_size(
        shell_pod: Obj, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    # `script` gives kubectl a terminal (as a user's shell would), 33 rows x 91 columns
    inner = (f"stty cols 91 rows 33; kubectl --kubeconfig {sandbox_cluster.kubeconfig} exec "
             f"-it -n {sb_namespace} shell -- sh -c 'tty; stty size; exit 5'")
    ran = subprocess.run(["script", "-qec", inner, "/dev/null"], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert ran.returncode == 5, ran.stdout + ran.stderr
    assert "/dev/pts/" in ran.stdout
    assert "33 91" in ran.stdout
