"""A cluster started through `skiff.cluster` alone, without the CLI: `new_cluster` in a tmp
dir, its Node Ready through `skiff.client.ApiClient`, and `stop()` ends every process it
started and forgets the cluster."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.provider import new_cluster
from skiff.cluster.state import ClusterState, pid_alive


def _ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def _wait_ready(api_target: str, name: str, timeout: float = 60.0) -> None:
    async with ApiClient(api_target) as api:
        deadline = time.monotonic() + timeout
        while True:
            nodes = (await api.list("nodes"))["items"]
            if any(n["metadata"]["name"] == name and _ready(n) for n in nodes):
                return
            assert time.monotonic() < deadline, f"{name} not Ready within {timeout:.0f}s"
            await asyncio.sleep(0.2)


def test_a_local_cluster_starts_and_stops_through_skiff_cluster(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    cluster = new_cluster(data_dir, nodes=1, insecure=True)  # plaintext: no PKI to make
    state = cluster.start(echo=lambda _line: None)
    try:
        assert ClusterState.load(data_dir) == state
        assert {"etcd", "apiserver", "kubelet-node-1"} <= {c.name for c in state.components}
        asyncio.run(_wait_ready(state.api, "node-1"))
    finally:
        cluster.stop()
    assert ClusterState.load(data_dir) is None
    assert [c.name for c in state.components if pid_alive(c.pid)] == []
    assert [p.name for p in cluster.processes if p.alive()] == []
