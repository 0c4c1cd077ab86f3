"""SPEC JN3 across two machines: a plain `skiff up --advertise-address` control plane on one
host and a kubelet that joins it from another with the printed line, unchanged.

The two "machines" are network namespaces of the test's own joined by a veth pair (the
host's namespace gets nothing): in A, `skiff up --advertise-address <A> --nodes 0
--detach` (etcd, apiserver and every other component on A's loopback, the apiserver on
every address of A); A's `skiff token create --print-join-command` line runs in B as it is
printed, in the foreground (the kubelet replaces the `skiff join` process, which the test
stops by its PID). The Node registers Ready, runs a pod, and `kubectl logs` from A comes
through the apiserver's mutual-TLS call to the kubelet's port 10250 on B; the pod's
in-cluster API address is A's advertised one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509

from skiff.cluster.netns.commands import run
from skiff.cluster.netns.hosts import kill_namespace_processes

pytestmark = pytest.mark.integration

NODE = "machine-b"
A_IP, B_IP = "198.18.36.1", "198.18.36.2"  # a benchmarking range: never routed anywhere
KUBELET_ARGS = ["--node-name", NODE, "--kubelet-arg=--sandbox=none",
                "--kubelet-arg=--node-status-update-frequency=2s"]


def _missing() -> str:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "network namespaces need Linux and root"
    for tool in ("ip", "etcd", "kubectl"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    return ""


@dataclass
class Hosts:
    a: str  # the control plane's namespace
    b: str  # the joining machine's
    data: Path  # A's data dir
    joined: Path  # B's data dir

    def on(self, netns: str, *argv: str, data: Path,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`skiff ARGV` run on a machine."""
        return subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-m", "skiff.cli.main", *argv],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
            env={**os.environ, "SKIFF_DATA_DIR": str(data), "SKIFF_SERVER": ""})

    def kubectl(self, *args: str, stdin: str | None = None
                ) -> subprocess.CompletedProcess[str]:
        """kubectl on the control plane's machine, with the kubeconfig `skiff up` wrote."""
        return subprocess.run(["ip", "netns", "exec", self.a, "kubectl", "--kubeconfig",
                               str(self.data / "kubeconfig"), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)


def _machines(a: str, b: str) -> None:
    """Two namespaces with loopback up and one veth between them (created inside A)."""
    for netns in (a, b):
        run("ip", "netns", "add", netns)
        run("ip", "-n", netns, "link", "set", "lo", "up")
    run("ip", "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
        "netns", b)
    for netns, ip in ((a, A_IP), (b, B_IP)):
        run("ip", "-n", netns, "addr", "add", f"{ip}/24", "dev", "eth0")
        run("ip", "-n", netns, "link", "set", "eth0", "up")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    if missing := _missing():
        pytest.skip(missing)
    tag = uuid.uuid4().hex[:6]
    made = Hosts(f"skiff-jn3h-{tag}-a", f"skiff-jn3h-{tag}-b",
                 tmp_path_factory.mktemp("jn3-machine-a"),
                 tmp_path_factory.mktemp("jn3-machine-b"))
    try:
        _machines(made.a, made.b)
        up = made.on(made.a, "up", "--advertise-address", A_IP, "--nodes", "0", "--detach",
                     data=made.data)
        assert up.returncode == 0, up.stderr + up.stdout
        assert f"API: {A_IP}:6443" in up.stdout
        yield made
    finally:
        made.on(made.a, "down", data=made.data, timeout=60)
        kill_namespace_processes([made.a, made.b])
        for netns in (made.a, made.b):
            run("ip", "netns", "delete", netns, check=False)  # the veth goes with them


def _wait(what: str, check: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}", pytrace=False)
        time.sleep(0.5)


def _node_ready(hosts: Hosts) -> bool:
    return hosts.kubectl("get", "node", NODE, "-o", 'jsonpath={.status.conditions[?(@.type=='
                         '"Ready")].status}').stdout == "True"


def test_jn3_the_advertised_control_plane_names_its_address(hosts: Hosts) -> None:
    cert = x509.load_pem_x509_certificate((hosts.data / "pki" / "apiserver.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert A_IP in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    kubeconfig = json.loads((hosts.data / "kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://{A_IP}:8080"
    info = hosts.kubectl("get", "configmap", "cluster-info", "-n", "kube-public", "-o",
                         "jsonpath={.data.kubeconfig}")
    assert info.returncode == 0, info.stderr
    assert f"server: https://{A_IP}:8080" in info.stdout
    # the kubernetes Service's endpoint is the advertised address, not loopback
    slices = hosts.kubectl("get", "endpointslices", "-n", "default", "-l",
                           "kubernetes.io/service-name=kubernetes", "-o",
                           "jsonpath={.items[*].endpoints[*].addresses[*]}")
    assert slices.returncode == 0 and slices.stdout.split() == [A_IP], slices


def test_jn3_a_kubelet_joins_from_another_machine_with_the_printed_line(
        hosts: Hosts) -> None:
    made = hosts.on(hosts.a, "token", "create", "--print-join-command", data=hosts.data)
    assert made.returncode == 0, made.stderr
    line = made.stdout.split()
    assert line[:3] == ["skiff", "join", f"{A_IP}:6443"], made.stdout
    log = hosts.joined / "join.log"
    with open(log, "wb") as out:
        # the foreground join: this PID becomes the kubelet's (ip netns exec and skiff
        # join both exec), so stopping it stops the node
        join = subprocess.Popen(
            ["ip", "netns", "exec", hosts.b, sys.executable, "-m", "skiff.cli.main",
             *line[1:], *KUBELET_ARGS], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SKIFF_DATA_DIR": str(hosts.joined), "SKIFF_SERVER": ""})
    try:
        _wait(f"Node {NODE} Ready", lambda: join.poll() is None and _node_ready(hosts))
        assert f"running the kubelet of {NODE!r}" in log.read_text()
        cmdline = Path(f"/proc/{join.pid}/cmdline").read_bytes().split(b"\0")
        assert b"skiff.kubelet" in cmdline  # the join process became the kubelet
        node = json.loads(hosts.kubectl("get", "node", NODE, "-o", "json").stdout)
        assert {"type": "InternalIP", "address": B_IP} in node["status"]["addresses"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-b"},
               "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                        "containers": [{"name": "c", "image": "busybox", "command": [
                            "sh", "-c", "echo hello from machine b, API "
                            "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; sleep 3600"]}]}}
        applied = hosts.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        assert applied.returncode == 0, applied.stderr
        _wait("the pod Running on machine B", lambda: hosts.kubectl(
            "get", "pod", "on-b", "-o", "jsonpath={.spec.nodeName} {.status.phase}"
        ).stdout == f"{NODE} Running")
        # apiserver (A) -> kubelet (B):10250, mutual TLS with the CSR-issued certificate
        _wait("kubectl logs through machine B's kubelet port", lambda: "hello from machine b"
              in hosts.kubectl("logs", "on-b").stdout, timeout=30)
        # the pod's in-cluster API is the advertised HTTPS address, not A's loopback
        assert f"API {A_IP}:8080" in hosts.kubectl("logs", "on-b").stdout
    finally:
        join.send_signal(signal.SIGTERM)
        try:
            join.wait(timeout=15)
        except subprocess.TimeoutExpired:
            join.kill()
            join.wait()
