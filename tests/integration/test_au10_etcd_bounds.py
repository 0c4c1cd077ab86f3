"""SPEC AU10: etcd stays bounded, and an etcd out of space does not take
the API down.

Real etcd members with a small `--quota-backend-bytes`, so a write loop would reach the
NOSPACE alarm within seconds, and real apiserver processes with a compressed
`--etcd-compaction-interval`.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aetcd
import aetcd.exceptions
import aetcd.rpc as etcdrpc
import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.cli import resources
from skiff.client import ApiClient
from skiff.cluster.processes import free_port, wait_grpc_healthy
from tests.integration.cluster import Cluster
from tests.integration.twoapiservers import two_apiservers

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
NO_SPACE = "etcdserver: mvcc: database space exceeded"


def _with_quota(cluster: Cluster, quota: int) -> Cluster:
    argv = cluster.etcd.argv
    argv[argv.index("--quota-backend-bytes") + 1] = str(quota)
    return cluster


def _configmap(name: str, size: int, serial: int = 0) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"blob": "x" * size, "serial": str(serial)}}


async def _db_size(etcd: aetcd.Client) -> tuple[int, int]:
    """(dbSize, dbSizeInUse) as `etcdctl endpoint status` reports them."""
    await etcd.connect()
    resp = await etcd.maintenancestub.Status(etcdrpc.StatusRequest(), timeout=5)
    return int(resp.dbSize), int(resp.dbSizeInUse)


async def _compacted_revision(etcd: aetcd.Client) -> int:
    """The revision etcd's log is compacted to (0: never compacted), read as a watch from
    revision 1 learns it."""
    try:
        watch = await etcd.watch(b"/registry/", start_revision=1)
    except aetcd.exceptions.RevisionCompactedError as err:
        return int(err.compacted_revision)
    try:
        async with asyncio.timeout(0.5):
            async for _ in watch:
                return 0
    except aetcd.exceptions.RevisionCompactedError as err:
        return int(err.compacted_revision)
    except TimeoutError:
        return 0
    finally:
        await watch.cancel()
    return 0


async def _expect_gone(call: Any, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        await call
    assert caught.value.reason == Reason.GONE, caught.value
    assert caught.value.message == message


async def test_au10_compaction_keeps_etcd_bounded_under_a_write_loop(tmp_path: Path) -> None:
    quota = 32 * MiB
    cluster = _with_quota(Cluster(tmp_path, apiserver_args=[
        "--etcd-compaction-interval", "0.5s", "--watch-cache-size", "20"]), quota)
    try:
        cluster.start()
        async with ApiClient(cluster.api_target, retry_seconds=20) as api, \
                aetcd.Client(port=cluster.etcd_port) as etcd:
            cm = await api.create(_configmap("big", 512 * 1024))
            first = int(cm["metadata"]["resourceVersion"])
            await api.create(_configmap("small", 10))
            token = (await api.list("configmaps", "default", limit=1))["metadata"]["continue"]
            # An `edit` user's loop of large updates, 6.25 MiB/s: twice the quota in ~10 s.
            # Every write must succeed (etcd never reaches NOSPACE).
            loop = asyncio.get_running_loop()
            start, written = loop.time(), 0
            for serial in range(1, 2 * quota // (512 * 1024) + 1):
                cm["data"]["serial"] = str(serial)
                cm = await api.update(cm)
                written += 512 * 1024
                await asyncio.sleep(max(0.0, start + serial * 0.08 - loop.time()))
            assert written >= 2 * quota
            compacted = await _compacted_revision(etcd)
            assert compacted > first, "etcd's log was never compacted"
            db_size, in_use = await _db_size(etcd)
            assert db_size < quota and in_use < quota // 2, (db_size, in_use)

            # History within the retention (one interval) is still there...
            cm["data"]["serial"] = "recent"
            recent = await api.update(cm)
            cm = recent
            cm["data"]["serial"] = "newest"
            newest = await api.update(cm)
            rv = int(recent["metadata"]["resourceVersion"])
            past = await api.get("configmaps", "big", "default", revision=rv)
            assert past["data"]["serial"] == "recent"
            versions = await api.history("configmaps", "big", "default")
            revisions = [v["revision"] for v in versions]
            assert revisions[-2:] == [rv, int(newest["metadata"]["resourceVersion"])]
            # ...and what is older was compacted: 410 Expired with Kubernetes' messages.
            assert revisions[0] > first and versions[0]["type"] == "MODIFIED"
            await _expect_gone(api.get("configmaps", "big", "default", revision=first),
                               "The resourceVersion for the provided get is too old.")
            await _expect_gone(api.list("configmaps", "default", revision=first),
                               "The resourceVersion for the provided list is too old.")
            await _expect_gone(api.list("configmaps", "default", limit=1,
                                        continue_token=token),
                               "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without "
                               "the continue parameter.")

            async def watch_from_first() -> None:
                async for _ in api.watch("configmaps", "default",
                                         resource_version=str(first)):
                    raise AssertionError("a watch from a compacted revision got events")

            await _expect_gone(asyncio.wait_for(watch_from_first(), 10),
                               "The resourceVersion for the provided watch is too old.")
            # `skiff history` says so.
            lines: list[str] = []
            await resources.history(api, "configmap", "big", namespace="default",
                                    out=lines.append)
            # (the retained window may have moved on since the history read above)
            assert lines[0].startswith("(older versions compacted before REVISION "), lines
    finally:
        cluster.stop()


def _http(method: str, url: str, body: Obj | None = None) -> tuple[int, Obj]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_au10_nospace_keeps_reads_and_deletes(tmp_path: Path) -> None:
    http_port = free_port()
    cluster = _with_quota(Cluster(tmp_path, apiserver_args=[
        "--http-port", str(http_port), "--endpoint-reconcile-interval", "0.2s"]), 16 * MiB)
    base = f"http://127.0.0.1:{http_port}/api/v1/namespaces/default/configmaps"
    try:
        cluster.start()
        async with ApiClient(cluster.api_target, retry_seconds=20) as api, \
                aetcd.Client(port=cluster.etcd_port) as etcd:
            # Fill etcd until its NOSPACE alarm refuses a write.
            names: list[str] = []
            attempted = ""
            with pytest.raises(ApiError) as caught:
                for i in range(64):
                    attempted = f"fill-{i}"
                    await api.create(_configmap(attempted, 900 * 1024))
                    names.append(attempted)
            assert caught.value.reason == Reason.INTERNAL_ERROR
            assert caught.value.message == NO_SPACE
            assert names, "etcd was full before the first write"
            assert [a async for a in etcd.list_alarms()], "etcd raised no NOSPACE alarm"

            # The apiserver stays up through many rounds of its background writes.
            await asyncio.sleep(2.0)
            assert cluster.apiserver.alive(), "the apiserver exited on NOSPACE"
            # Creates and updates answer a Kubernetes Status with etcd's message.
            code, status = await asyncio.to_thread(
                _http, "POST", base, _configmap("more", 10))
            assert (code, status["kind"], status["code"], status["message"]) == (
                500, "Status", 500, NO_SPACE)
            current = await api.get("configmaps", names[0], "default")
            current["data"]["serial"] = "changed"
            code, status = await asyncio.to_thread(
                _http, "PUT", f"{base}/{names[0]}", current)
            assert (code, status["message"]) == (500, NO_SPACE)
            # An Event is written on an etcd lease (--event-ttl): refused the same way.
            with pytest.raises(ApiError) as refused:
                await api.create({
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": "full", "namespace": "default"},
                    "involvedObject": {"kind": "ConfigMap", "name": names[0],
                                       "namespace": "default"},
                    "reason": "Tested", "message": "etcd is full", "type": "Warning"})
            assert (refused.value.reason, refused.value.message) == (Reason.INTERNAL_ERROR,
                                                                     NO_SPACE)

            # Reads, lists and watches work; so do deletes, which free space.
            listed = await api.list("configmaps", "default")
            # The refused create may have been an ambiguous one (a 504 the client retried and
            # etcd then refused): it may be stored; every earlier one is.
            stored = {i["metadata"]["name"] for i in listed["items"]}
            assert stored - {attempted} == set(names), (sorted(stored), sorted(names))
            code, body = await asyncio.to_thread(_http, "GET", f"{base}/{names[0]}")
            assert code == 200 and body["data"]["serial"] == "0"
            events: list[tuple[str, str]] = []

            async def watch() -> None:
                async for ev in api.watch("configmaps", "default", resource_version=str(
                        listed["metadata"]["resourceVersion"])):
                    if ev.type != "BOOKMARK":
                        events.append((ev.type, ev.object["metadata"]["name"]))
                        return

            watcher = asyncio.create_task(watch())
            code, _ = await asyncio.to_thread(_http, "DELETE", f"{base}/{names[0]}")
            assert code == 200
            await asyncio.wait_for(watcher, 10)
            assert events == [("DELETED", names[0])]

            # An apiserver (re)started while etcd is out of space serves reads too.
            cluster.apiserver.stop()
            cluster.start_apiserver()
            assert (await api.get("configmaps", names[1], "default"))["data"]["serial"] == "0"

            # The operator's cure: free space, compact, defragment, disarm. Writes work again.
            for name in [*names[1:], *({attempted} & stored)]:
                await api.delete("configmaps", name, "default")
            head = (await api.list("configmaps", "default"))["metadata"]["resourceVersion"]
            await etcd.compact(int(head), physical=True)
            await etcd.defragment()
            for alarm in [a async for a in etcd.list_alarms()]:  # as `etcdctl alarm disarm`
                await etcd.disarm_alarm(alarm.member_id)
            created = await api.create(_configmap("after", 10))
            assert created["metadata"]["name"] == "after"
            assert cluster.apiserver.alive()
    finally:
        cluster.stop()


async def test_au10_two_apiservers_compact_once_per_interval(tmp_path: Path) -> None:
    interval = 0.5
    flags = ["--etcd-compaction-interval", f"{interval}s"]
    began = time.monotonic()
    with two_apiservers(tmp_path, flags, flags) as two:
        wait_grpc_healthy(two.second, two.second_target)
        await asyncio.sleep(4.0)
        async with aetcd.Client(port=two.cluster.etcd_port) as etcd:
            got = await etcd.get(b"compact_rev_key")
            assert got is not None, "no apiserver claimed a compaction"
            elapsed = time.monotonic() - began
            # The key's version counts the claims of both apiservers together: one per
            # interval, not one per apiserver and interval.
            assert 3 <= got.version <= elapsed / interval + 2, (got.version, elapsed)
            assert await _compacted_revision(etcd) > 0


async def test_au10_history_of_an_object_deleted_before_a_compaction_is_not_a_500(
        tmp_path: Path) -> None:
    """`skiff history` of a deleted object replays etcd's watch log; once etcd has compacted
    that log (in any cluster older than the interval), the replay starts at the compaction
    point: what is left, or NotFound — never an internal error."""
    cluster = Cluster(tmp_path, apiserver_args=["--etcd-compaction-interval", "0.5s"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target, retry_seconds=20) as api, \
                aetcd.Client(port=cluster.etcd_port) as etcd:
            cm = await api.create(_configmap("gone", 10))
            first = int(cm["metadata"]["resourceVersion"])
            cm["data"]["serial"] = "1"
            await api.update(cm)
            await api.delete("configmaps", "gone", "default")
            for serial in range(40):  # revisions past the deletion, compacted behind
                await api.create(_configmap(f"filler-{serial}", 10))
                await asyncio.sleep(0.05)

            async def compacted_past_first() -> bool:
                return await _compacted_revision(etcd) > first + 3

            deadline = time.monotonic() + 20
            while not await compacted_past_first():
                assert time.monotonic() < deadline, "etcd's log was never compacted"
                await asyncio.sleep(0.2)
            try:
                versions = await api.history("configmaps", "gone", "default")
            except ApiError as err:
                assert err.reason == Reason.NOT_FOUND, err
            else:
                assert all(v["revision"] > first for v in versions)
    finally:
        cluster.stop()
