"""SPEC SB1/SB2/SB4 through the `skiff` command as a user runs it: as root `skiff up` gives
pods their own IPs without touching the host's network namespace, `skiff down` leaves no
namespace, veth or mount of the cluster, and a start without sandboxes says so."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import time
from pathlib import Path

from skiff.cluster.sandboxes import pod_network_namespace
from tests.integration.skiffcli import skiff

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: python
    command: ["{python}", "-m", "http.server", "8080"]
"""


def _host_links() -> list[str]:
    """Skiff's interfaces or pod addresses in the host's namespace (read-only). Other
    programs (docker) change the host's links meanwhile, so only Skiff's are compared."""
    out = subprocess.run(["ip", "-j", "addr", "show"], check=True, capture_output=True,
                         text=True).stdout
    pods = ipaddress.ip_network("10.244.0.0/16")
    found = []
    for link in json.loads(out):
        name = str(link["ifname"])
        addrs = [str(a["local"]) for a in link.get("addr_info", [])]
        if name.startswith(("sk", "skiff")) or any(
                ipaddress.ip_address(a) in pods for a in addrs if ":" not in a):
            found.append(f"{name} {addrs}")
    return sorted(found)


def _skiff_netns() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line.split()[0] for line in out.splitlines()
                  if line.startswith(("skiff-pod-", "skiff-podnet-")))


def _netns_mounts(names: set[str]) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].rsplit("/", 1)[-1] in names]


def _pod_ips(data_dir: Path, names: list[str], timeout: float = 90.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        ips = []
        for name in names:
            got = skiff(data_dir, "get", "pod", name, "-o", "json")
            pod = json.loads(got.stdout) if got.returncode == 0 else {}
            status = pod.get("status", {})
            if status.get("phase") == "Running" and status.get("podIP"):
                ips.append(str(status["podIP"]))
        if len(ips) == len(names):
            return ips
        assert time.monotonic() < deadline, f"pods {names} not Running with an IP in time"
        time.sleep(0.5)


def test_sb2_skiff_up_sandboxes_pods_and_down_leaves_no_namespace_veth_or_mount(
        tmp_path: Path) -> None:
    host_before = _host_links()
    ours: set[str] = set()  # this cluster's namespaces (other tests may run their own)
    up = skiff(tmp_path, "up", "--detach", "--nodes", "1")
    try:
        assert up.returncode == 0, up.stderr
        assert "NOT isolated" not in up.stdout
        for name in ("a", "b"):
            applied = skiff(tmp_path, "apply", "-f", "-",
                            stdin=POD.format(name=name, python="python3"))
            assert applied.returncode == 0, applied.stderr
        ips = _pod_ips(tmp_path, ["a", "b"])
        ours = {pod_network_namespace(tmp_path)} | {
            "skiff-pod-" + json.loads(skiff(tmp_path, "get", "pod", n, "-o", "json").stdout)[
                "metadata"]["uid"] for n in ("a", "b")}
        assert len(set(ips)) == 2 and "127.0.0.1" not in ips
        assert ours <= set(_skiff_netns())
        assert len(_netns_mounts(ours)) >= len(ours)
        assert _host_links() == host_before  # SB2: the host's namespace is never changed
    finally:
        down = skiff(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert ours and not ours & set(_skiff_netns())
    assert _netns_mounts(ours) == []
    assert _host_links() == host_before


def test_sb1_a_start_without_sandboxes_prints_the_warning(tmp_path: Path) -> None:
    up = skiff(tmp_path, "up", "--detach", "--nodes", "0",
               env={"SKIFF_KUBELET_SANDBOX": "none"})
    try:
        assert up.returncode == 0, up.stderr
        assert "pods are NOT isolated (kubelet sandbox: none)" in up.stdout
    finally:
        skiff(tmp_path, "down")
