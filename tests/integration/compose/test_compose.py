"""DO2: `docker compose up` of deploy/compose gives a working cluster that chaos can cut,
and that cluster runs with TLS: mutual TLS on gRPC, HTTPS for kubectl with the
kubeconfig the `pki` service wrote, etcd only for the apiserver's certificate.

One test walks the whole path a user takes: the offline image, the cluster up and healthy, a
pod created through the published apiserver port, pods with their own IPs reaching each other
across nodes by IP and through a Service until node-2 is partitioned (JN1, podnetwork.py), a
node partitioned (really unable to reach the apiserver) and healed (reachable again, still
found by its service name), a partition from one component only, and everything torn down
with its networks and volumes. The nodes joined with a bootstrap token (SPEC JN3): each
client certificate came from one CSR the token's user made and the controller-manager
approved and signed, and no node container has a certificate mounted.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.groups import certificates as csrs
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.cluster.chaos import docker as chaos
from tests.integration.compose.conftest import (
    COMPOSE_DIR,
    ComposeProject,
    log,
    node_csrs,
    node_ready,
    run,
    wait_for,
)
from tests.integration.compose.podnetwork import check_pod_network

# Docker tests never run at once (one engine, heavy): pytest-xdist --dist loadgroup.
pytestmark = pytest.mark.xdist_group("docker")

NODES = ["node-1", "node-2", "node-3"]
def pod_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "compose"}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


def create_pod(project: ComposeProject, name: str, tmp_path: Path) -> None:
    """Through the `skiff` CLI, as a user would (installed with the package)."""
    manifest = tmp_path / "pod.json"  # JSON is YAML
    manifest.write_text(json.dumps(pod_manifest(name)))
    skiff = Path(sys.executable).with_name("skiff")
    assert skiff.exists(), f"the skiff CLI is not installed next to {sys.executable}"
    run([str(skiff), "--server", f"127.0.0.1:{project.api_port}", "apply", "-f",
         str(manifest)], timeout=60)


def eventually(check: Any, *, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(1)
    return bool(check())


@pytest.mark.timeout(900)
def test_do2_jn1_compose_cluster_pods_partition_and_heal(compose_project: ComposeProject,
                                                          tmp_path: Path) -> None:
    project = compose_project
    t0 = time.monotonic()
    services = ["etcd", "apiserver", "scheduler", "controller-manager", *NODES]

    # --no-build: the image was built above from local material; nothing may be pulled.
    project.compose("up", "-d", "--no-build", *services, timeout=300)
    project.wait_healthy(services, timeout=180)
    log(f"{len(services)} services healthy in {time.monotonic() - t0:.1f}s")

    create_pod(project, "compose-demo", tmp_path)
    log("pod created through the skiff CLI")

    async def check_cluster() -> None:
        async with ApiClient(f"127.0.0.1:{project.api_port}", retry_seconds=30) as api:
            pod = await api.get("pods", "compose-demo", "default")
            assert pod["metadata"]["uid"]
            async def all_ready(c: ApiClient) -> list[str]:
                nodes = (await c.list("nodes"))["items"]
                names = sorted(n["metadata"]["name"] for n in nodes if node_ready(n))
                return names if names == NODES else []
            await wait_for(api, "node-1..3 Ready", all_ready, timeout=90)
            await check_joined_by_csr(project, api)

            async def running(c: ApiClient) -> str:
                p = await c.get("pods", "compose-demo", "default")
                phase = (p.get("status") or {}).get("phase")
                return str(p["spec"].get("nodeName") or "") if phase == "Running" else ""
            # Bound and started by the node's kubelet: the whole path, not just scheduling.
            node = await wait_for(api, "the pod to be Running", running, timeout=120)
            assert node in NODES

    asyncio.run(check_cluster())

    check_tls(project)

    async def check_pods() -> None:  # JN1: pod IPs, node routes, Services, DNS, partition
        async with ApiClient(f"127.0.0.1:{project.api_port}", retry_seconds=30) as api:
            await check_pod_network(project, api, tmp_path)

    asyncio.run(check_pods())

    apiserver_ip = project.address("apiserver")
    etcd_ip = project.address("etcd")
    assert project.can_connect("node-1", apiserver_ip, 6443), "node-1 cannot reach the apiserver"

    # A full partition: node-1 is cut from every network of the project.
    message = chaos.partition("node-1", from_component=None, project=project.name)
    log(message)
    assert "node-1" in message
    assert not project.can_connect("node-1", apiserver_ip, 6443), \
        "node-1 still reaches the apiserver after `chaos partition node-1`"
    assert not project.can_connect("node-1", etcd_ip, 2379)
    assert project.can_connect("node-2", apiserver_ip, 6443), "node-2 was cut too"

    message = chaos.heal("node-1", project=project.name)
    log(message)
    assert "node-1" in message
    assert eventually(lambda: project.can_connect("node-1", apiserver_ip, 6443)), \
        "node-1 cannot reach the apiserver after `chaos heal node-1`"
    assert project.can_connect("node-1", "apiserver", 6443), "apiserver name lost after heal"
    # Its service alias is back, so the rest of the cluster finds it by name again.
    aliases = project.inspect("node-1")["NetworkSettings"]["Networks"]
    assert any("node-1" in (n.get("Aliases") or []) for n in aliases.values()), aliases

    # A partition from one component only: node-2 loses the apiserver but keeps etcd.
    message = chaos.partition("node-2", from_component="apiserver", project=project.name)
    log(message)
    assert not project.can_connect("node-2", apiserver_ip, 6443), \
        "node-2 still reaches the apiserver after `chaos partition node-2 --from apiserver`"
    assert project.can_connect("node-2", etcd_ip, 2379), "--from apiserver also cut etcd"
    assert project.can_connect("node-3", apiserver_ip, 6443), "node-3 was cut too"

    message = chaos.heal(None, project=project.name)
    log(message)
    assert "node-2" in message
    assert eventually(lambda: project.can_connect("node-2", apiserver_ip, 6443)), \
        "node-2 cannot reach the apiserver after `chaos heal`"
    assert "nothing to heal" in chaos.heal(None, project=project.name)

    with pytest.raises(chaos.ChaosError, match="no component 'node-9'"):
        chaos.partition("node-9", from_component=None, project=project.name)
    with pytest.raises(chaos.ChaosError, match="no containers of compose project"):
        chaos.heal(None, project=f"{project.name}-absent")
    log(f"cluster, pod, partitions and heals done in {time.monotonic() - t0:.1f}s")


# From inside a container: speak HTTPS to etcd with whatever that container holds; print the
# status line. A node has no etcd certificate (nor the etcd CA), so it may not even verify.
ETCD_PROBE = """
import os, socket, ssl, sys
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
if os.path.exists("/etc/skiff/pki/etcd-client.crt"):
    ctx.load_cert_chain("/etc/skiff/pki/etcd-client.crt", "/etc/skiff/pki/etcd-client.key")
try:
    with socket.create_connection(("etcd", 2379), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="etcd") as tls:
            tls.sendall(b"GET /version HTTP/1.1\\r\\nHost: etcd\\r\\n\\r\\n")
            print(tls.recv(200).split(b"\\r\\n")[0].decode() or "closed")
except (OSError, ssl.SSLError) as err:
    print("refused:", type(err).__name__)
"""

# From inside node-2: node-1's kubelet port with node-2's own kubelet client certificate
# (a valid identity of the cluster, not one the kubelet serves), then with none at all.
KUBELET_PROBE = """
import os, grpc, msgpack
pki = "/var/lib/skiff/node/joined/node-2/pki/"  # what `skiff join` got by CSR
ca, cert, key = (open(pki + f, "rb").read()
                 for f in ("ca.crt", "kubelet-client.crt", "kubelet-client.key"))
request = msgpack.packb({"namespace": "default", "name": "compose-demo"})
for creds in (grpc.ssl_channel_credentials(ca, key, cert), grpc.ssl_channel_credentials(ca)):
    with grpc.secure_channel("node-1:10250", creds) as channel:
        try:
            channel.unary_unary("/skiff.v1.Kubelet/Logs")(request, timeout=10)
            print("ANSWERED")
        except grpc.RpcError as err:
            print(err.code().name)
"""


async def check_joined_by_csr(project: ComposeProject, api: ApiClient) -> None:
    """SPEC JN3: one kube-apiserver-client-kubelet CSR per node, made by the bootstrap token's
    user, Approved and issued; each node's serving certificate came by CSR too."""
    token_id = (project.pki_dir / "join" / "token").read_text().partition(".")[0]
    client = await node_csrs(api, csrs.KUBE_APISERVER_CLIENT_KUBELET)
    assert sorted(client) == NODES, client
    for node, made in client.items():
        assert len(made) == 1, f"{node} asked for its client certificate {len(made)} times"
        csr = made[0]
        assert csr["spec"]["username"] == f"system:bootstrap:{token_id}", csr["spec"]
        assert csrs.has_condition(csr, csrs.APPROVED), csr.get("status")
        assert csr["status"].get("certificate"), f"{node}'s client CSR was not signed"
    serving = await node_csrs(api, csrs.KUBELET_SERVING)
    for node in NODES:
        assert any(c["spec"]["username"] == f"system:node:{node}"
                   and c.get("status", {}).get("certificate")
                   for c in serving.get(node, [])), f"{node} has no serving certificate"


def check_tls(project: ComposeProject) -> None:
    """The compose cluster runs with TLS, as a user on the host sees it."""
    target = f"127.0.0.1:{project.api_port}"

    async def anonymous() -> None:
        # No credentials (trusting the CA): 401; plaintext: refused. Nothing kept.
        for creds, reason in ((Credentials(ca_file=project.admin().ca_file),
                               Reason.UNAUTHORIZED),
                              (Credentials(), Reason.SERVICE_UNAVAILABLE)):
            async with ApiClient(target, retry_seconds=2, timeout=5,
                                 credentials=creds) as anon:
                with pytest.raises(ApiError) as refused:
                    await anon.create(pod_manifest("anonymous"))
                assert refused.value.reason == reason, refused.value.message
        async with ApiClient(target, retry_seconds=30, credentials=project.admin()) as api:
            names = [p["metadata"]["name"] for p in
                     (await api.list("pods", namespace="default"))["items"]]
            assert "anonymous" not in names, names

    asyncio.run(anonymous())

    # kubectl over HTTPS with the kubeconfig the `pki` service wrote (relative file paths).
    kubeconfig = project.pki_dir / "kubeconfig"
    assert f"https://127.0.0.1:{project.http_port}" in kubeconfig.read_text()
    nodes = run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"],
                timeout=60).stdout.split()
    assert sorted(nodes) == [f"node/{n}" for n in NODES], nodes
    whoami = run(["kubectl", "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o",
                  "jsonpath={.status.userInfo.groups}"], timeout=60, check=False)
    if whoami.returncode == 0:  # kubectl >= 1.27 asks SelfSubjectReview
        assert "system:masters" in whoami.stdout, whoami.stdout
    # An anonymous HTTPS POST of a pod (trusting the CA, no certificate, no token): 401.
    context = ssl.create_default_context(cafile=project.admin().ca_file)
    request = urllib.request.Request(
        f"https://127.0.0.1:{project.http_port}/api/v1/namespaces/default/pods",
        data=json.dumps(pod_manifest("anonymous")).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30, context=context)
    assert refused.value.code == 401, refused.value.code
    assert json.loads(refused.value.read())["reason"] == "Unauthorized"

    # SPEC JN3: a node container has no certificate mounted, only pki/join/ (the token and
    # the CA's hash) and its own volume, where what it got by CSR lives.
    mounts = project.inspect("node-1")["Mounts"]
    assert [(m["Type"], Path(m["Source"]).resolve()) for m in mounts if m["Type"] == "bind"] \
        == [("bind", (project.pki_dir / "join").resolve())], mounts
    assert [m["Destination"] for m in mounts if m["Type"] == "volume"] == [
        "/var/lib/skiff/node"], mounts
    files = project.docker("exec", project.container("node-1"), "ls",
                           "/etc/skiff/join").stdout.split()
    assert sorted(files) == ["ca-cert-hash", "token"], files
    # The kubelets' own port is mutual TLS too: kubectl exec goes through the apiserver's
    # kubelet client certificate; another node's kubelet (or no certificate) gets nothing.
    said = run(["kubectl", "--kubeconfig", str(kubeconfig), "exec", "compose-demo", "--",
                "echo", "through the kubelet port"], timeout=60)
    assert said.stdout.strip() == "through the kubelet port", said.stdout + said.stderr
    by_other_node = project.docker("exec", project.container("node-2"), "python3", "-c",
                                   KUBELET_PROBE).stdout.split()
    assert by_other_node == ["PERMISSION_DENIED", "UNAVAILABLE"], by_other_node
    # etcd answers the apiserver's client certificate and refuses a node (none at all).
    by_apiserver = project.docker("exec", project.container("apiserver"), "python3", "-c",
                                  ETCD_PROBE).stdout.strip()
    assert by_apiserver.startswith("HTTP/1.1 200"), by_apiserver
    by_node = project.docker("exec", project.container("node-1"), "python3", "-c",
                             ETCD_PROBE).stdout.strip()
    assert not by_node.startswith("HTTP/1.1 200"), by_node
    log(f"TLS: anonymous gRPC/HTTPS refused, kubectl as admin, etcd: {by_node!r} for a node")


# Builds the wheelhouse and the image again, starts and waits: 120-135 s in CI runs, over
# the suite's default 180 s once when the machine's load was 23.
@pytest.mark.timeout(900)
def test_defect12_make_compose_up_waits_for_a_healthy_cluster_and_exits_0(
        compose_project: ComposeProject) -> None:
    """The README's command itself: `make compose-up` builds, starts and waits, and a
    one-shot service that exited 0 (the `pki` one) counts as done, not as unhealthy."""
    env = {**compose_project.env(), "COMPOSE_PROJECT_NAME": compose_project.name,
           "SKIFF_IMAGE": "skiff:compose-make-test", "PYTHON": sys.executable}
    t0 = time.monotonic()
    up = run(["make", "compose-up"], env=env, cwd=COMPOSE_DIR.parent.parent, timeout=840,
             check=False)
    log(f"make compose-up in {time.monotonic() - t0:.1f}s")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "cluster up (TLS)" in up.stderr
    assert "not healthy" not in up.stderr
    pki = compose_project.pki_dir
    nodes = run(["kubectl", "--kubeconfig", str(pki / "kubeconfig"), "get", "nodes",
                 "-o", "json"], env=env)
    assert [n["metadata"]["name"] for n in json.loads(nodes.stdout)["items"]
            if n["metadata"]["name"].startswith("node-")] == ["node-1", "node-2", "node-3"]
