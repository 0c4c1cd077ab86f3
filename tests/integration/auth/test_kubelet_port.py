"""The kubelet's own port (logs, exec, metrics) is mutual TLS in a secure
cluster, as in Kubernetes: only the apiserver's `kube-apiserver-kubelet-client` identity
(and system:masters) gets in. Without a certificate, or with another node's, node-1's
kubelet answers nothing; `kubectl logs` and `kubectl exec` (through the apiserver) work."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient, Credentials
from skiff.client.logs import fetch_logs, kubelet_endpoint
from skiff.client.streaming import exec_call
from skiff.pki import NODES_GROUP, issue_client
from skiff.rpc.codec import encode
from tests.integration.skiffcli import skiff

from .test_up_secure import kubectl

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker"},
       "spec": {"containers": [{"name": "c", "image": "busybox", "command": [
           "python3", "-c",
           "import time; print('secret-log-line', flush=True); time.sleep(600)"]}]}}


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("kubelet-port")
    up = skiff(data_dir, "up", "--detach", "--nodes", "2")
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = data_dir / "kubeconfig"
        pod = json.loads(json.dumps(POD))
        pod["spec"]["nodeName"] = "node-1"
        created = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create",
                                  "-f", "-"], input=json.dumps(pod), text=True,
                                 capture_output=True, timeout=60)
        assert created.returncode == 0, created.stderr
        deadline = time.monotonic() + 90
        while "secret-log-line" not in kubectl(kubeconfig, "logs", "talker").stdout:
            assert time.monotonic() < deadline, kubectl(kubeconfig, "get", "pod", "talker",
                                                         "-o", "yaml").stdout
            time.sleep(0.5)
        yield data_dir
    finally:
        skiff(data_dir, "down")


async def _node1_target(data_dir: Path) -> str:
    pki = data_dir / "pki"
    admin = Credentials(ca_file=str(pki / "ca.crt"), cert_file=str(pki / "admin.crt"),
                        key_file=str(pki / "admin.key"))
    from skiff.cluster.state import ClusterState

    state = ClusterState.load(data_dir)
    assert state is not None
    async with ApiClient(state.api, credentials=admin, retry_seconds=10) as api:
        return kubelet_endpoint(await api.get("nodes", "node-1"))


def test_AU1_kubectl_logs_and_exec_work_through_the_apiserver(two_nodes: Path) -> None:
    kubeconfig = two_nodes / "kubeconfig"
    logs = kubectl(kubeconfig, "logs", "talker")
    assert logs.returncode == 0 and "secret-log-line" in logs.stdout, logs.stderr
    ran = kubectl(kubeconfig, "exec", "talker", "--", "sh", "-c", "echo inside")
    assert ran.returncode == 0 and ran.stdout == "inside\n", ran.stderr
    # the skiff CLI reaches the kubelet itself, with the kubeconfig's admin certificate
    own = skiff(two_nodes, "logs", "talker")
    assert own.returncode == 0 and "secret-log-line" in own.stdout, own.stderr


async def test_AU1_kubelet_port_refuses_a_client_without_a_certificate(
        two_nodes: Path) -> None:
    target = await _node1_target(two_nodes)
    ca_only = Credentials(ca_file=str(two_nodes / "pki" / "ca.crt"))
    with pytest.raises(ApiError) as no_cert:
        await fetch_logs(target, "default", "talker", credentials=ca_only)
    assert no_cert.value.reason == Reason.SERVICE_UNAVAILABLE
    with pytest.raises(ApiError) as plaintext:
        await fetch_logs(target, "default", "talker", credentials=Credentials())
    assert plaintext.value.reason == Reason.SERVICE_UNAVAILABLE


async def test_AU1_node2_credentials_cannot_read_node1_logs_or_exec(two_nodes: Path) -> None:
    target = await _node1_target(two_nodes)
    pki = two_nodes / "pki"
    node2 = Credentials(ca_file=str(pki / "ca.crt"), cert_file=str(pki / "kubelet-node-2.crt"),
                        key_file=str(pki / "kubelet-node-2.key"))
    with pytest.raises(ApiError) as logs:
        await fetch_logs(target, "default", "talker", credentials=node2)
    assert logs.value.reason == Reason.FORBIDDEN
    assert "user=system:node:node-2" in logs.value.message
    async with grpc.aio.secure_channel(target, node2.grpc_credentials()) as channel:
        call = exec_call(channel)
        with pytest.raises(grpc.aio.AioRpcError) as exec_err:
            await call.write(encode({"namespace": "default", "name": "talker",
                                     "command": ["true"], "check": True}))
            await call.read()
        assert exec_err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # a user certificate of the cluster CA is no key either; the admin's is
    carol = issue_client(pki, "user-carol", user="carol", groups=(NODES_GROUP,))
    as_carol = Credentials(ca_file=str(pki / "ca.crt"), cert_file=str(carol.cert),
                           key_file=str(carol.key))
    with pytest.raises(ApiError) as user_err:
        await fetch_logs(target, "default", "talker", credentials=as_carol)
    assert user_err.value.reason == Reason.FORBIDDEN
    admin = Credentials(ca_file=str(pki / "ca.crt"), cert_file=str(pki / "admin.crt"),
                        key_file=str(pki / "admin.key"))
    assert "secret-log-line" in await fetch_logs(target, "default", "talker",
                                                  credentials=admin)


def test_AU1_resource_metrics_come_through_the_apiserver(two_nodes: Path) -> None:
    kubeconfig = two_nodes / "kubeconfig"
    deadline = time.monotonic() + 90
    while True:
        got = kubectl(kubeconfig, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/node-1")
        if got.returncode == 0:
            break
        assert time.monotonic() < deadline, got.stderr  # the kubelet refused the apiserver?
        time.sleep(1)
    assert json.loads(got.stdout)["metadata"]["name"] == "node-1"
