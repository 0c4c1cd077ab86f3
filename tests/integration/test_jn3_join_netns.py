"""SPEC JN3 and JN2 on a real `skiff up --netns` cluster: a kubelet on another "machine" (a
network namespace of its own on the cluster's bridge, whose only way out is the apiserver's
gRPC address) joins with `skiff join` given only that address, a bootstrap token and the CA
hash; its Node registers and runs a pod, its certificates rotate; a wrong CA hash, a deleted
or expired token and a taken node name are refused, and the server does not auto-approve a
token's CSR for an existing Node."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from skiff.api.groups.certificates import KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING
from skiff.bootstraptoken import parse_token
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.cluster.netns.commands import run
from skiff.cluster.netns.hosts import Network, kill_namespace_processes, network_of
from skiff.cluster.state import ClusterState
from skiff.join.certificates import (
    CLIENT_USAGES,
    CertificateRequestError,
    build_request,
    new_key,
    request_certificate,
)
from tests.integration.skiffcli import skiff

pytestmark = pytest.mark.integration

NODE = "joined-1"
API_PORT = 6443
# every certificate lives 10 min (+ the signer's 5 min backdate): renewed at 34 % of
# that, ~6 s after it was issued (SPEC JN2 compressed by settings, not waited for)
CONFIG = "controllerManager:\n  clusterSigningDuration: 10m\n"
KUBELET_ARGS = ["--kubelet-arg=--sandbox=none",
                "--kubelet-arg=--certificate-rotation-fraction=0.34",
                "--kubelet-arg=--certificate-check-period=1s",
                "--kubelet-arg=--node-status-update-frequency=2s"]


def _missing() -> str:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "network namespaces need Linux and root"
    for tool in ("ip", "nft", "etcd", "kubectl"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    return ""


@dataclass
class Cluster:
    data: Path
    machine: str  # the joining host's network namespace
    api: str  # the apiserver's gRPC address on the cluster's network
    node_dir: Path  # where `skiff join` keeps the node's files

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.data / "kubeconfig"),
                               *args], capture_output=True, text=True, timeout=60)

    def join_line(self) -> tuple[str, str, str]:
        """(address, token, hash) of `skiff token create --print-join-command`."""
        made = skiff(self.data, "token", "create", "--print-join-command")
        assert made.returncode == 0, made.stderr
        words = made.stdout.split()
        assert words[:2] == ["skiff", "join"], made.stdout
        return words[2], words[words.index("--token") + 1], \
            words[words.index("--discovery-token-ca-cert-hash") + 1]

    def join(self, token: str, ca_hash: str, *extra: str, name: str = NODE,
             node_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`skiff join` run on the joining machine with the API address it can reach."""
        return subprocess.run(
            ["ip", "netns", "exec", self.machine, sys.executable, "-m", "skiff.cli.main",
             "--data-dir", str(node_dir or self.node_dir), "join", self.api, "--token", token,
             "--discovery-token-ca-cert-hash", ca_hash, "--node-name", name, *extra],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _only_the_api(netns: str, api_ip: str) -> None:
    """The joining machine may open connections to the apiserver's gRPC port only."""
    rules = (f"table inet joinfw {{\n chain out {{\n"
             f"  type filter hook output priority 0; policy drop;\n"
             f'  oif "lo" accept\n  ct state established,related accept\n'
             f"  ip daddr {api_ip} tcp dport {API_PORT} accept\n }}\n}}\n")
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules,
                   text=True, check=True, capture_output=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if missing := _missing():
        pytest.skip(missing)
    data = tmp_path_factory.mktemp("jn3-join")
    (data / "config.yaml").write_text(CONFIG)
    up = skiff(data, "up", "--netns", "--detach", "--nodes", "0", "--config",
               str(data / "config.yaml"))
    network: Network | None = None
    node_dir = data / "machine"
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        state = ClusterState.load(data)
        assert state is not None
        network = network_of(state)
        host = network.add_host("node-9")  # a host the cluster never started anything on
        _only_the_api(host.netns, network.host("apiserver").ip)
        yield Cluster(data, host.netns, f"{network.host('apiserver').ip}:{API_PORT}",
                      node_dir)
    finally:
        pid_file = node_dir / "joined" / NODE / "kubelet.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        if network is not None and "node-9" in network.hosts:
            kill_namespace_processes([network.hosts["node-9"].netns])
            run("ip", "netns", "delete", network.hosts["node-9"].netns, check=False)
        skiff(data, "down")


def _wait(what: str, check: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}", pytrace=False)
        time.sleep(0.5)


def _csrs(cluster: Cluster) -> list[Any]:
    got = cluster.kubectl("get", "csr", "-o", "json")
    assert got.returncode == 0, got.stderr
    return list(json.loads(got.stdout)["items"])


def _conditions(csr: Any) -> set[str]:
    status = csr.get("status")
    return {str(c["type"]) for c in (status or {}).get("conditions") or []}


def _node_ready(cluster: Cluster) -> bool:
    got = cluster.kubectl("get", "node", NODE, "-o", "json")
    if got.returncode != 0:
        return False
    conditions = json.loads(got.stdout)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass(frozen=True)
class Joined:
    token: str
    output: str  # what `skiff join --detach` printed


@pytest.fixture(scope="module")
def joined(cluster: Cluster) -> Joined:
    """NODE joined (once per module; every test that needs the joined node asks for it, so
    none depends on the order pytest-randomly gives them)."""
    printed, token, ca_hash = cluster.join_line()
    assert printed == cluster.api  # the apiserver host's, not the CLI's gateway on loopback
    done = cluster.join(token, ca_hash, "--detach", *KUBELET_ARGS)
    assert done.returncode == 0, done.stderr + done.stdout
    _wait(f"Node {NODE} Ready", lambda: _node_ready(cluster))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-joined"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                    "containers": [{"name": "c", "image": "busybox",
                                    "command": ["sh", "-c", "echo hello from joined; "
                                                "sleep 3600"]}]}}
    made = subprocess.run(["kubectl", "--kubeconfig", str(cluster.data / "kubeconfig"),
                           "apply", "-f", "-"], input=json.dumps(pod), text=True,
                          capture_output=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return Joined(token, done.stdout)


def test_jn3_a_kubelet_on_another_machine_joins_with_address_token_and_hash(
        cluster: Cluster, joined: Joined) -> None:
    token = joined.token
    assert f"This node has joined the cluster: kubelet '{NODE}'" in joined.output
    pki = cluster.node_dir / "joined" / NODE / "pki"
    assert (pki / "kubelet-client.key").stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate((pki / "kubelet-client.crt").read_bytes())
    assert cert.subject.rfc4514_string() == f"CN=system:node:{NODE},O=system:nodes"
    token_id = parse_token(token).id
    bootstrap = [c for c in _csrs(cluster)
                 if c["spec"]["username"] == f"system:bootstrap:{token_id}"]
    assert len(bootstrap) == 1 and {"Approved"} <= _conditions(bootstrap[0])
    assert bootstrap[0]["status"]["certificate"]
    _wait("the pod Running on the joined node", lambda: cluster.kubectl(
        "get", "pod", "on-joined", "-o", "jsonpath={.spec.nodeName} {.status.phase}"
    ).stdout == f"{NODE} Running")
    # logs travel apiserver -> kubelet:10250 over mutual TLS with the serving certificate
    # the kubelet got by CSR (auto-approved: it names only the Node's own addresses)
    _wait("kubectl logs through the joined kubelet's port", lambda: "hello from joined" in
          cluster.kubectl("logs", "on-joined").stdout, timeout=30)


def test_jn2_the_joined_kubelet_rotates_both_certificates_without_a_restart(
        cluster: Cluster, joined: Joined) -> None:
    pki = cluster.node_dir / "joined" / NODE / "pki"
    pid = (cluster.node_dir / "joined" / NODE / "kubelet.pid").read_text().strip()
    first = x509.load_pem_x509_certificate((pki / "kubelet-client.crt").read_bytes())

    def renewed(signer: str) -> bool:
        return any(c["spec"]["signerName"] == signer
                   and c["spec"]["username"] == f"system:node:{NODE}"
                   and {"Approved"} <= _conditions(c)
                   and c["status"].get("certificate")
                   for c in _csrs(cluster))

    _wait("a client certificate renewal signed",
          lambda: renewed(KUBE_APISERVER_CLIENT_KUBELET), timeout=40)
    _wait("the new client certificate written", lambda: x509.load_pem_x509_certificate(
        (pki / "kubelet-client.crt").read_bytes()).serial_number != first.serial_number)
    _wait("a serving certificate renewal signed", lambda: sum(
        1 for c in _csrs(cluster) if c["spec"]["signerName"] == KUBELET_SERVING
        and c["spec"]["username"] == f"system:node:{NODE}"
        and (c.get("status") or {}).get("certificate")) >= 2, timeout=30)
    os.kill(int(pid), 0)  # the same kubelet process
    # the kubelet still reaches the API with its new identity: its Node stays Ready and
    # its pod's logs still come through its port
    time.sleep(3)
    _wait(f"Node {NODE} Ready after the rotation", lambda: _node_ready(cluster))
    _wait("kubectl logs through the joined kubelet's port after the rotation",
          lambda: "hello from joined" in cluster.kubectl("logs", "on-joined").stdout,
          timeout=30)


def test_jn3_refusals_leave_nothing_behind(cluster: Cluster, joined: Joined) -> None:
    _, token, ca_hash = cluster.join_line()
    wrong = "sha256:" + ("0" * 64)
    elsewhere = cluster.data / "another-machine"
    with ThreadPoolExecutor(2) as pool:  # two machines at once: CI time
        refusing = pool.submit(cluster.join, token, wrong, name="other")
        # NODE is a Node already
        taking = pool.submit(cluster.join, token, ca_hash, node_dir=elsewhere)
        refused, taken = refusing.result(), taking.result()
    assert refused.returncode != 0
    assert "cluster CA found in cluster-info ConfigMap is invalid: none of the public keys" \
        in refused.stderr and "Traceback" not in refused.stderr
    assert taken.returncode != 0 and "Traceback" not in taken.stderr
    assert f'a Node with name "{NODE}" and status' in taken.stderr
    deleted = skiff(cluster.data, "token", "delete", token)
    assert deleted.returncode == 0, deleted.stderr
    # an expired token: the tokencleaner deletes its Secret, and its JWS goes with it
    short = skiff(cluster.data, "token", "create", "--ttl", "2s")
    assert short.returncode == 0, short.stderr
    expired = short.stdout.strip()
    _wait("the expired token's Secret deleted by the tokencleaner", lambda: cluster.kubectl(
        "-n", "kube-system", "get", "secret",
        f"bootstrap-token-{parse_token(expired).id}").returncode != 0, timeout=30)
    with ThreadPoolExecutor(2) as pool:
        going = pool.submit(cluster.join, token, ca_hash, "--timeout", "2", name="other")
        expiring = pool.submit(cluster.join, expired, ca_hash, "--timeout", "2",
                               name="other-2")
        gone, late = going.result(), expiring.result()
    for refused_token, result in ((token, gone), (expired, late)):
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert "there is no JWS signed token in the cluster-info ConfigMap for token ID " \
            f"{parse_token(refused_token).id!r}" in result.stderr, result.stderr
    assert not (cluster.node_dir / "joined" / "other-2").exists()
    assert not (cluster.node_dir / "joined" / "other").exists()
    assert not elsewhere.exists()


def test_jn3_a_bootstrap_token_csr_for_an_existing_node_is_not_auto_approved(
        cluster: Cluster, joined: Joined) -> None:
    _, token, _ = cluster.join_line()
    state = ClusterState.load(cluster.data)
    assert state is not None

    async def ask() -> str:
        async with ApiClient(state.api, credentials=Credentials(
                ca_file=str(cluster.data / "pki" / "ca.crt"), token=token)) as api:
            try:
                await request_certificate(
                    api, name="node-csr-", signer=KUBE_APISERVER_CLIENT_KUBELET,
                    request_pem=build_request(new_key(), node_name=NODE),
                    usages=CLIENT_USAGES, timeout=3)
            except CertificateRequestError as err:
                return str(err)
        return "signed"

    message = asyncio.run(ask())
    assert "approve it by hand with `kubectl certificate approve node-csr-" in message
    pending = [c for c in _csrs(cluster) if c["metadata"]["name"] in message]
    assert len(pending) == 1 and not _conditions(pending[0])
    assert base64.b64decode(pending[0]["spec"]["request"])
