"""Lists that scale: 50,000 pods list in pages and in one unpaged list, continue
tokens pin the first page's revision and expire (410) once it is compacted, and an informer
re-lists 50,000 pods after a forced compaction.

The pods are written straight into the real etcd in batched transactions (creating 50,000
through the API would dominate the test's time); every read goes through the apiserver.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path
from typing import Any

import aetcd
import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient, Informer
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from skiff.rpc import codec
from tests.integration.cluster import Cluster
from tests.integration.objects import pod

pytestmark = pytest.mark.integration

PODS = 50_000
NAMESPACE = "default"


def _stored_pod(i: int) -> Obj:
    obj = pod(f"p{i:05d}", NAMESPACE, labels={"half": str(i % 2)})
    obj["metadata"].update(uid=f"00000000-0000-0000-0000-{i:012d}",
                           creationTimestamp="2026-01-01T00:00:00Z")
    return obj


async def _fill_etcd(etcd_port: int, count: int) -> None:
    """Write `count` pods in transactions of 100 puts."""
    async with aetcd.Client(port=etcd_port, options={
            "grpc.max_send_message_length": 64 * 1024 * 1024}) as etcd:
        for base in range(0, count, 100):
            ops = [etcd.transactions.put(
                f"/registry/pods/{NAMESPACE}/p{i:05d}".encode(), codec.encode(_stored_pod(i)))
                for i in range(base, min(base + 100, count))]
            await etcd.transaction(compare=[], success=ops, failure=[])


async def _wait_until(predicate: Any, timeout: float = 120.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.1)


@pytest.mark.timeout(300)  # 50,000 pods through etcd, the apiserver, kubectl and an informer
async def test_50000_pods_list_in_pages_and_unpaged_and_an_informer_relists_after_compaction(
        tmp_path: Path) -> None:
    http_port = free_port()
    fresh_cluster = Cluster(tmp_path, apiserver_args=["--http-port", str(http_port)])
    try:
        fresh_cluster.start()
        await _check(fresh_cluster, http_port, tmp_path)
    finally:
        fresh_cluster.stop()


async def _check(fresh_cluster: Cluster, http_port: int, root: Path) -> None:
    await _fill_etcd(fresh_cluster.etcd_port, PODS)
    async with ApiClient(fresh_cluster.api_target, retry_seconds=60) as api:
        # One unpaged list of everything (was: etcd's 4 MiB reply limit, an error).
        whole = await api.list("pods", NAMESPACE)
        assert len(whole["items"]) == PODS
        assert "continue" not in whole["metadata"]

        # Pages: a consistent snapshot at the first page's revision, remainingItemCount.
        first = await api.list("pods", NAMESPACE, limit=5000)
        assert len(first["items"]) == 5000
        assert first["metadata"]["remainingItemCount"] == PODS - 5000
        pinned = first["metadata"]["resourceVersion"]
        await api.create(pod("zz-after-first-page", NAMESPACE))
        names = [o["metadata"]["name"] for o in first["items"]]
        token = first["metadata"]["continue"]
        while token:
            page = await api.list("pods", NAMESPACE, limit=5000, continue_token=token)
            assert page["metadata"]["resourceVersion"] == pinned
            names += [o["metadata"]["name"] for o in page["items"]]
            token = page["metadata"].get("continue", "")
        assert names == [f"p{i:05d}" for i in range(PODS)], "every pod once, in key order"

        # A selector fills each page with matches only (no remainingItemCount then).
        half = await api.list("pods", NAMESPACE, label_selector="half=1", limit=1000)
        assert len(half["items"]) == 1000
        assert {o["metadata"]["labels"]["half"] for o in half["items"]} == {"1"}
        assert "remainingItemCount" not in half["metadata"]

        # The same through the Kubernetes HTTP API, as kubectl and client-go page.
        url = f"http://127.0.0.1:{http_port}/api/v1/namespaces/{NAMESPACE}/pods?limit=2"
        with urllib.request.urlopen(url, timeout=60) as resp:
            body = json.loads(resp.read())
        assert len(body["items"]) == 2 and body["metadata"]["continue"]
        assert body["metadata"]["remainingItemCount"] == PODS + 1 - 2
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(url + "&continue=not-a-token", timeout=60)
        assert bad.value.code == 400
        # kubectl pages (--chunk-size, 500 by default) and gets every pod.
        config = write_kubeconfig(root, f"http://127.0.0.1:{http_port}")
        out = subprocess.run(["kubectl", "--kubeconfig", str(config), "get", "pods", "-n",
                              NAMESPACE, "--chunk-size", "5000", "--no-headers"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == PODS + 1

        # An informer lists in pages, then must re-list after a forced compaction.
        informer = Informer(api, "pods", namespace=NAMESPACE, backoff_max=0.5)
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(120)
            assert len(informer.store) == PODS + 1
            stale_token = (await api.list("pods", NAMESPACE, limit=10))["metadata"]["continue"]
            fresh_cluster.apiserver.stop()
            async with aetcd.Client(port=fresh_cluster.etcd_port) as etcd:
                await etcd.delete(f"/registry/pods/{NAMESPACE}/p00000".encode())
                put = await etcd.put(f"/registry/pods/{NAMESPACE}/p00001".encode(),
                                     codec.encode(_stored_pod(1)))
                await etcd.compact(put.header.revision, physical=True)
            fresh_cluster.start_apiserver()
            await _wait_until(lambda: informer.relists >= 1
                              and len(informer.store) == PODS
                              and informer.store.get(f"{NAMESPACE}/p00000") is None)
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

        # The token of a list whose revision was compacted has expired: 410 Gone.
        with pytest.raises(ApiError) as gone:
            await api.list("pods", NAMESPACE, limit=10, continue_token=stale_token)
        assert gone.value.reason == Reason.GONE
        assert "continue" in gone.value.message
