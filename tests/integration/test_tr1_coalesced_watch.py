"""SPEC TR1 (issue 37), against a real etcd and apiserver: only a watch whose client asks
to coalesce (`coalesce=True`: Skiff's scheduler) waits for the apiserver's
`--watch-coalesce` tick while its stream is busy; every other watch on the same apiserver
gets each event at once, so a controller's informer never lags for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.cluster import Cluster

TICK = 0.6


def _configmap(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}}


async def test_tr1_only_a_watch_that_asks_waits_for_the_coalescing_tick(
        tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, apiserver_args=["--watch-coalesce", f"{TICK}s"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target) as api:
            start = (await api.list("configmaps", "default"))["metadata"]["resourceVersion"]
            loop = asyncio.get_running_loop()
            seen: dict[bool, dict[str, float]] = {False: {}, True: {}}

            async def follow(coalesce: bool) -> None:
                async for ev in api.watch("configmaps", "default", resource_version=start,
                                          coalesce=coalesce):
                    if ev.type == "ADDED":
                        seen[coalesce][ev.object["metadata"]["name"]] = loop.time()

            async def arrived(name: str) -> None:
                while not all(name in s for s in seen.values()):
                    await asyncio.sleep(0.01)

            watches = [asyncio.create_task(follow(c)) for c in (False, True)]
            try:
                await api.create(_configmap("first"))
                await asyncio.wait_for(arrived("first"), 10)
                # Both streams just sent a message: busy. The next event waits for the
                # tick on the stream that asked, and only there.
                await api.create(_configmap("second"))
                written = loop.time()
                await asyncio.wait_for(arrived("second"), 10)
                plain = seen[False]["second"] - written
                coalesced = seen[True]["second"] - written
                assert plain < TICK / 2, plain
                assert coalesced >= TICK / 2, coalesced
            finally:
                for task in watches:
                    task.cancel()
                await asyncio.gather(*watches, return_exceptions=True)
    finally:
        cluster.stop()
