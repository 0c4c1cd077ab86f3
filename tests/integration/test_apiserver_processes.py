"""Several apiserver processes serve one address (SO_REUSEPORT), each with its own
etcd client and watch cache; what one process writes, every process lists and watches."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.objects import pod
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def test_apiserver_processes_share_one_port_and_see_each_others_writes(
        tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, apiserver_args=["--processes", "2", "--http-port",
                                                str(free_port())])
    try:
        cluster.start()
        assert cluster.apiserver.pid is not None
        replicas = _children(cluster.apiserver.pid)
        assert len(replicas) == 1, "one more apiserver process"
        # Each new client is a new connection, which the kernel spreads over the processes;
        # whichever serves it, the writes of all the others are there.
        clients = [ApiClient(cluster.api_target, retry_seconds=30) for _ in range(8)]
        try:
            watch = clients[0].watch("pods", "default", resource_version="1")
            for i, client in enumerate(clients):
                await client.create(pod(f"p{i}", "default"))
            for client in clients:
                listed = await client.list("pods", "default")
                assert sorted(o["metadata"]["name"] for o in listed["items"]) == \
                    [f"p{i}" for i in range(8)]
            seen: list[str] = []

            async def collect() -> None:
                async for ev in watch:
                    if ev.type == "ADDED":
                        seen.append(ev.object["metadata"]["name"])
                        if len(seen) == 8:
                            return

            await asyncio.wait_for(collect(), 30)
            assert sorted(seen) == [f"p{i}" for i in range(8)]
        finally:
            for client in clients:
                await client.close()
        # A replica never outlives its parent, even one killed with SIGKILL (it would keep
        # the port and serve from a stale cache next to a restarted apiserver).
        cluster.apiserver.kill()
        await wait_for(lambda: _gone(replicas[0]), timeout=30, what="the replica to exit")
    finally:
        cluster.stop()


async def _gone(pid: int) -> bool:
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return True
