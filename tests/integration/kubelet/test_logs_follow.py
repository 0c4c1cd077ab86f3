"""Following a container's log (`kubectl logs -f`, `skiff.client.pod_logs(
follow=True)`) streams new lines until the container exits, through a real kubelet."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skiff.client import ApiClient, pod_logs
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from skiff.kubelet.logs import fetch_logs
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import Node, pod_manifest, start_kubelet, stop_kubelet
from tests.integration.kubelet.conftest import wait_until as wait_for

# "two" comes seconds after "one": a reader that does not follow sees only "one".
SCRIPT = "echo one; sleep 3; echo two; sleep 1; echo three"


@pytest.fixture(scope="module")
def follow_cluster(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[Cluster, Node, Path]]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    root = tmp_path_factory.mktemp("logs-follow")
    port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(port)]).start()
    node = start_kubelet(cluster, root)
    try:
        yield cluster, node, write_kubeconfig(root, f"http://127.0.0.1:{port}")
    finally:
        asyncio.run(stop_kubelet(node))
        cluster.stop()


@pytest.fixture
async def api(follow_cluster: tuple[Cluster, Node, Path]) -> AsyncIterator[ApiClient]:
    async with ApiClient(follow_cluster[0].api_target, retry_seconds=20) as client:
        yield client


async def start_pod(api: ApiClient, node: Node, name: str) -> None:
    await api.create(pod_manifest(name, "default", node.name, [
        {"name": "main", "image": "busybox", "command": ["sh", "-c", SCRIPT]}],
        restartPolicy="Never"))

    async def said_one() -> bool:
        try:
            return "one" in await fetch_logs(node.health_target, "default", name)
        except Exception:
            return False

    await wait_for(said_one, what=f"{name} wrote its first line")


async def test_defect5_kubectl_logs_follow_streams_until_the_container_exits(
        api: ApiClient, follow_cluster: tuple[Cluster, Node, Path]) -> None:
    _, node, config = follow_cluster
    await start_pod(api, node, "chatty")
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "logs", "-f", "chatty",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "one\ntwo\nthree\n"


async def test_defect5_client_pod_logs_follow_yields_new_output_then_ends(
        api: ApiClient, follow_cluster: tuple[Cluster, Node, Path]) -> None:
    _, node, _ = follow_cluster
    await start_pod(api, node, "talker")
    pieces = [p async for p in pod_logs(api, "talker", "default", follow=True)]
    assert "".join(pieces) == "one\ntwo\nthree\n"
    assert [p async for p in pod_logs(api, "talker", "default", tail_lines=1)] == ["three\n"]
