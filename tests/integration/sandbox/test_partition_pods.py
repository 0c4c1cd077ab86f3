"""SPEC SB2 on real network cuts: in a `skiff up --netns` cluster, a partitioned node's pod
stops answering another node's pod at its pod IP, and answers again after heal."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.integration.skiffcli import skiff

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: python
    command: ["{python}", "-m", "http.server", "8080"]
    readinessProbe: {{httpGet: {{port: 8080}}, periodSeconds: 1}}
"""


def _kubectl(data_dir: Path, *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_sb2_a_partitioned_nodes_pod_stops_answering_and_answers_after_heal(
        tmp_path: Path) -> None:
    pod_uids: set[str] = set()
    up = skiff(tmp_path, "up", "--netns", "--detach", "--nodes", "2")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        for name, node in (("server", "node-1"), ("client", "node-2")):
            applied = _kubectl(tmp_path, "apply", "-f", "-", stdin=POD.format(
                name=name, node=node, python="python3"))
            assert applied.returncode == 0, applied.stderr
        ready = _kubectl(tmp_path, "wait", "--for=condition=Ready", "pod/server",
                         "pod/client", "--timeout=90s")
        assert ready.returncode == 0, ready.stderr
        ip = json.loads(_kubectl(tmp_path, "get", "pod", "server", "-o", "json").stdout)[
            "status"]["podIP"]
        pod_uids = {json.loads(_kubectl(tmp_path, "get", "pod", n, "-o", "json").stdout)[
            "metadata"]["uid"] for n in ("server", "client")}

        def answers() -> bool:
            got = _kubectl(tmp_path, "exec", "client", "--", "python3", "-c",
                           "import urllib.request;print(urllib.request.urlopen("
                           f"'http://{ip}:8080', timeout=3).status)")
            return got.returncode == 0 and got.stdout.strip() == "200"

        def eventually(want: bool, what: str) -> None:
            deadline = time.monotonic() + 60
            while answers() != want:
                assert time.monotonic() < deadline, what
                time.sleep(0.5)

        eventually(True, "the client pod never reached the server pod")
        cut = skiff(tmp_path, "chaos", "partition", "node-1")
        assert cut.returncode == 0, cut.stderr
        assert "cut the pod traffic of node-1" in cut.stdout
        eventually(False, "the partitioned node's pod still answers")
        healed = skiff(tmp_path, "chaos", "heal", "node-1")
        assert healed.returncode == 0, healed.stderr
        eventually(True, "the pod does not answer again after heal")
    finally:
        down = skiff(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    uids = {p.read_text() for p in tmp_path.glob("nodes/*/ipam/*/*")}
    assert uids == set()  # skiff down forgets the addresses with the namespaces
    assert not [line for line in left.splitlines() if "skiff-pod-" in line
                and line.split()[0][len("skiff-pod-"):] in pod_uids]
