"""Fixtures for pod sandbox tests (SPEC SB): a cluster of their own (etcd, apiserver, a
controller-manager running node IPAM, two real kubelets as root), so the pod CIDRs they
hand out never reach the nodes of other test packages. Each run uses its own pod network
namespace, counted before and after."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyroute2 import netns

from skiff.client import ApiClient
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import Node, start_kubelet, stop_kubelet

CLUSTER_CIDR = "10.123.0.0/16"


@dataclass
class SandboxCluster:
    cluster: Cluster
    pod_network: str
    nodes: list[Node]
    kubeconfig: Path

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60
                ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout)


def skiff_namespaces(pod_network: str) -> list[str]:
    return [n for n in netns.listnetns() if n == pod_network or n.startswith("skiff-pod-")]


def veths(pod_network: str) -> list[str]:
    """The pods' veths on the pod network's bridge (iproute2's JSON output, read-only)."""
    out = subprocess.run(["ip", "-j", "-n", pod_network, "link", "show"], check=True,
                         capture_output=True, text=True).stdout
    return [str(link["ifname"]) for link in json.loads(out)
            if str(link["ifname"]).startswith("sk") and link["ifname"] != "skiff0"]


@pytest.fixture(scope="package")
def sandbox_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxCluster]:
    root = tmp_path_factory.mktemp("sandbox")
    http_port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(http_port)]).start()
    kubeconfig = write_kubeconfig(root, f"http://127.0.0.1:{http_port}")
    pod_network = f"skiff-podnet-{uuid.uuid4().hex[:6]}"
    try:
        cluster.add_service("controller-manager", "skiff.controller_manager", [
            "--controllers", "nodeipam", "--leader-elect", "false",
            "--cluster-cidr", CLUSTER_CIDR, "--node-cidr-mask-size", "24"])
        nodes = [start_kubelet(cluster, Path(root), name=f"sb-{i}",
                               extra=["--pod-network-namespace", pod_network])
                 for i in range(2)]
        yield SandboxCluster(cluster, pod_network, nodes, kubeconfig)
        for node in nodes:
            asyncio.run(stop_kubelet(node))
    finally:
        cluster.stop()
        if pod_network in netns.listnetns():
            netns.remove(pod_network)


@pytest.fixture
async def sb_api(sandbox_cluster: SandboxCluster) -> AsyncIterator[ApiClient]:
    async with ApiClient(sandbox_cluster.cluster.api_target, retry_seconds=20) as client:
        yield client


@pytest.fixture
async def sb_namespace(sb_api: ApiClient) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    await sb_api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
