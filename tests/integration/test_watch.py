"""SPEC AS5: watches from a resourceVersion, across apiserver and etcd restarts.

Everything here is real: an etcd process, an apiserver process, SIGKILL and restart.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from contextlib import suppress
from typing import Any

import aetcd
import grpc
import msgpack

from skiff.api import ApiError, Reason
from skiff.client import ApiClient, Informer, WatchEvent
from skiff.rpc import decode, encode, method_path
from tests.integration.cluster import Cluster
from tests.integration.objects import pod
from tests.integration.waiting import wait_for


async def _collect(api: ApiClient, namespace: str, rv: str, count: int,
                   timeout: float = 20.0, **kw: Any) -> list[WatchEvent]:
    events: list[WatchEvent] = []

    async def run() -> None:
        async for ev in api.watch("pods", namespace, resource_version=rv, **kw):
            if ev.type != "BOOKMARK":
                events.append(ev)
                if len(events) == count:
                    return

    await asyncio.wait_for(run(), timeout)
    return events


async def test_as5_watch_from_r_delivers_every_later_change_in_revision_order(
        api: ApiClient, namespace: str) -> None:
    start = (await api.list("pods", namespace))["metadata"]["resourceVersion"]
    a = await api.create(pod("a", namespace))
    b = await api.create(pod("b", namespace))
    written = [int(a["metadata"]["resourceVersion"]), int(b["metadata"]["resourceVersion"])]
    a["metadata"]["labels"] = {"x": "1"}
    a = await api.update(a)
    written.append(int(a["metadata"]["resourceVersion"]))
    await api.delete("pods", "b", namespace)
    events = await _collect(api, namespace, start, 4)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    revs = [int(e.resource_version) for e in events]
    assert revs[:3] == written, "each event carries the revision of the write it reports"
    assert revs == sorted(revs) and len(set(revs)) == 4
    # Starting in the middle gives exactly the suffix.
    later = await _collect(api, namespace, str(revs[1]), 2)
    assert [int(e.resource_version) for e in later] == revs[2:]


async def test_as5_label_selector_watch_sends_deleted_when_an_object_stops_matching(
        api: ApiClient, namespace: str) -> None:
    start = (await api.list("pods", namespace))["metadata"]["resourceVersion"]
    p = await api.create(pod("p", namespace, labels={"app": "web"}))
    p["metadata"]["labels"] = {"app": "db"}
    moved = await api.update(p)
    events = await _collect(api, namespace, start, 2, label_selector="app=web")
    assert [e.type for e in events] == ["ADDED", "DELETED"]
    # As Kubernetes' cacher: the previous (matching) object at the new resourceVersion.
    left = events[1].object
    assert left["metadata"]["labels"] == {"app": "web"}
    assert left["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]


async def test_as5_watch_without_resource_version_starts_with_the_current_state(
        api: ApiClient, namespace: str) -> None:
    await api.create(pod("a", namespace))
    events = await _collect(api, namespace, "", 1)
    assert events[0].type == "ADDED" and events[0].object["metadata"]["name"] == "a"


async def test_as5_bookmarks_are_sent(tmp_path: Any) -> None:
    cluster = Cluster(tmp_path, apiserver_args=["--watch-bookmark-interval", "0.2"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target) as api:
            start = (await api.list("pods", "default"))["metadata"]["resourceVersion"]
            await api.create(pod("elsewhere", "kube-system"))

            async def first_bookmark() -> WatchEvent:
                async for ev in api.watch("pods", "default", resource_version=start):
                    if ev.type == "BOOKMARK":
                        return ev
                raise AssertionError("stream ended")

            bookmark = await asyncio.wait_for(first_bookmark(), 10)
            assert int(bookmark.resource_version) > int(start)
    finally:
        cluster.stop()


def _etcd_watchers(cluster: Cluster) -> int:
    with urllib.request.urlopen(f"{cluster.etcd_endpoint}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    match = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.M)
    assert match, "etcd metrics have no watcher gauge"
    return int(float(match.group(1)))


async def test_as5_many_watchers_share_one_etcd_watch(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    baseline = _etcd_watchers(fresh_cluster)
    async with ApiClient(fresh_cluster.api_target) as api:
        start = (await api.list("pods", "default"))["metadata"]["resourceVersion"]
        received = [0] * 100
        release = asyncio.Event()

        async def watcher(i: int) -> None:
            async for ev in api.watch("pods", "default", resource_version=start):
                if ev.type == "ADDED":
                    received[i] += 1
                    await release.wait()  # keep the stream open while the gauge is read
                    return

        tasks = [asyncio.create_task(watcher(i), name=f"watcher-{i}") for i in range(100)]
        try:
            await api.create(pod("p", "default"))

            async def all_received() -> bool:
                return received == [1] * 100

            await wait_for(all_received, timeout=30, what="every watcher to see the pod")
            # All 100 client watches are open now; etcd must still see at most one more.
            open_now = _etcd_watchers(fresh_cluster)
            assert open_now <= baseline + 1, (
                f"{open_now - baseline} etcd watches for 100 client watches")
        finally:
            release.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)


async def _writer(api: ApiClient, namespace: str, count: int, written: list[int],
                  pause: float) -> None:
    """Creates and updates pods one at a time, recording each write's revision."""
    for i in range(count):
        for _attempt in range(200):
            try:
                obj = await api.create(pod(f"w{i}", namespace, labels={"i": str(i)}))
                break
            except ApiError as err:
                if err.reason == Reason.ALREADY_EXISTS:
                    # The first attempt landed before the connection broke.
                    obj = await api.get("pods", f"w{i}", namespace)
                    break
                if err.reason not in (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT,
                                      Reason.INTERNAL_ERROR):
                    raise
                await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"could not write w{i}")
        written.append(int(obj["metadata"]["resourceVersion"]))
        await asyncio.sleep(pause)


async def _resuming_watch(api: ApiClient, namespace: str, start: str,
                          seen: list[tuple[str, str, int]], stop: asyncio.Event) -> None:
    """What a client does by hand: watch, and on a broken stream resume from the last rv."""
    rv = start
    while not stop.is_set():
        try:
            async for ev in api.watch("pods", namespace, resource_version=rv):
                rv = ev.resource_version
                if ev.type != "BOOKMARK":
                    seen.append((ev.type, ev.object["metadata"]["name"], int(rv)))
        except ApiError as err:
            assert err.reason != Reason.GONE, "watch expired during a restart"
            await asyncio.sleep(0.1)


async def test_as5_watch_from_r_sees_every_change_exactly_once_across_apiserver_and_etcd_restarts(
        fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=60) as api:
        await api.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "w"}})
        start = (await api.list("pods", "w"))["metadata"]["resourceVersion"]
        written: list[int] = []
        seen: list[tuple[str, str, int]] = []
        stop = asyncio.Event()
        watcher = asyncio.create_task(_resuming_watch(api, "w", start, seen, stop))
        writer = asyncio.create_task(_writer(api, "w", 60, written, 0.02))

        await _wait_until(lambda: len(written) >= 15)
        fresh_cluster.apiserver.kill()  # SIGKILL: a crash
        await asyncio.sleep(0.3)
        fresh_cluster.start_apiserver(wait=False)
        await _wait_until(lambda: len(written) >= 30)
        fresh_cluster.etcd.kill()
        await asyncio.sleep(0.3)
        fresh_cluster.start_etcd()
        await _wait_until(lambda: len(written) >= 45)
        fresh_cluster.apiserver.stop()  # SIGTERM: a clean restart
        fresh_cluster.start_apiserver(wait=False)
        await asyncio.wait_for(writer, 90)
        await _wait_until(lambda: len(seen) >= len(written), timeout=30)
        stop.set()
        watcher.cancel()
        with suppress(asyncio.CancelledError):
            await watcher

    revisions = [rev for _, _, rev in seen]
    assert revisions == sorted(written), "every write seen once, in order, no gaps"
    assert [name for _, name, _ in seen] == [f"w{i}" for i in range(60)]
    assert all(t == "ADDED" for t, _, _ in seen)


async def test_as5_compacted_revision_is_gone_and_the_informer_relists_and_converges(
        fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=60) as api:
        for name in ("p0", "p1", "ghost"):
            await api.create(pod(name, "default"))
        p2 = await api.create(pod("p2", "default"))
        await api.delete("pods", "p2", "default")
        informer = Informer(api, "pods", namespace="default", backoff_max=0.5)
        deleted: list[str] = []
        informer.add_handler(on_delete=lambda o: deleted.append(o["metadata"]["name"]))
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(10)
            old = informer.resource_version
            # The informer is cut off while the store changes and etcd compacts its log.
            fresh_cluster.apiserver.stop()
            async with aetcd.Client(port=fresh_cluster.etcd_port) as etcd:
                await etcd.delete(b"/registry/pods/default/ghost")
                value = msgpack.packb({k: v for k, v in p2.items()})
                put = await etcd.put(b"/registry/pods/default/p2", value)
                await etcd.compact(put.header.revision, physical=True)
            fresh_cluster.start_apiserver()
            assert await _watch_verdict(api, old) == Reason.GONE

            await _wait_until(lambda: informer.relists >= 1 and sorted(
                o["metadata"]["name"] for o in informer.store.list()) == ["p0", "p1", "p2"])
            assert deleted == ["ghost"]
            await api.create(pod("p3", "default"))
            await _wait_until(lambda: len(informer.store) == 4)
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


async def test_informer_lists_then_follows_changes(api: ApiClient, namespace: str) -> None:
    await api.create(pod("a", namespace, node="node-1"))
    informer = Informer(api, "pods", namespace=namespace,
                        indexers={"nodeName": lambda o: [o["spec"].get("nodeName")]
                                  if o["spec"].get("nodeName") else []})
    added: list[str] = []
    informer.add_handler(on_add=lambda o: added.append(o["metadata"]["name"]))
    task = asyncio.create_task(informer.run())
    try:
        await informer.wait_synced(10)
        await api.create(pod("b", namespace, node="node-2"))
        await _wait_until(lambda: len(informer.store) == 2)
        assert added == ["a", "b"]
        assert [o["metadata"]["name"] for o in informer.store.by_index("nodeName", "node-2")] \
            == ["b"]
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def _watch_verdict(api: ApiClient, rv: str, timeout: float = 20.0) -> Reason:
    """How a watch from `rv` ends, retried as a reflector retries: ServiceUnavailable means
    the stream broke (here: the client's channel has not reconnected to the restarted
    apiserver yet), not an answer about `rv`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await _collect(api, "default", rv, 1, timeout=10)
        except ApiError as err:
            if (err.reason != Reason.SERVICE_UNAVAILABLE
                    or asyncio.get_running_loop().time() > deadline):
                return err.reason
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"a watch from compacted revision {rv} delivered events")


async def _wait_until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_as5_informer_recovers_after_a_partition_heals(api: ApiClient,
                                                             namespace: str) -> None:
    """A partition drops packets without a reset; the informer must notice the dead
    stream (keepalive / idle timeout) and resume from its resourceVersion after heal."""
    from tests.integration.blackhole import Blackhole

    port = int(api.target.rsplit(":", 1)[1])
    async with Blackhole(port) as hole, ApiClient(hole.target, keepalive_seconds=1,
                                                  retry_seconds=30) as cut_off:
        informer = Informer(cut_off, "pods", namespace=namespace, watch_idle_timeout=3,
                            backoff_max=0.5)
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(10)
            await api.create(pod("before", namespace))
            await _wait_until(lambda: len(informer.store) == 1)
            hole.cut()
            await api.create(pod("during", namespace))
            await asyncio.sleep(1.5)
            assert len(informer.store) == 1, "a cut connection delivered an event"
            hole.heal()
            await api.create(pod("after", namespace))
            await _wait_until(lambda: len(informer.store) == 3, timeout=20)
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


async def _raw_watch(target: str, namespace: str, rv: str, count: int, *,
                     batch: bool) -> list[Any]:
    """The Watch stream's messages as sent, decoded but not unpacked into events."""
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_stream(method_path("Watch"))(encode({
            "resource": "pods", "namespace": namespace, "batch": batch,
            "options": {"resourceVersion": rv, "allowWatchBookmarks": False}}))
        messages: list[Any] = []
        seen = 0
        async for data in call:
            message = decode(data)
            messages.append(message)
            seen += len(message) if isinstance(message, list) else 1
            if seen >= count:
                call.cancel()
                break
        return messages


async def test_as5_events_waiting_together_reach_a_batching_watcher_in_one_message(
        api: ApiClient, namespace: str, shared_cluster: Cluster) -> None:
    start = (await api.list("pods", namespace))["metadata"]["resourceVersion"]
    written = [int((await api.create(pod(f"p{i}", namespace)))["metadata"]["resourceVersion"])
               for i in range(40)]
    # The watch cache follows etcd a moment behind the writes: once it has sent the last
    # one to a watcher, all 40 are in its window when the next watch opens, ready together.
    await asyncio.wait_for(_raw_watch(shared_cluster.api_target, namespace,
                                      str(written[-2]), 1, batch=False), 20)
    batched = await asyncio.wait_for(_raw_watch(shared_cluster.api_target, namespace, start,
                                                40, batch=True), 20)
    assert isinstance(batched[0], list) and len(batched[0]) == 40, (
        f"first message: {type(batched[0]).__name__} of {len(batched[0])}")
    assert [int(e["object"]["metadata"]["resourceVersion"]) for e in batched[0]] == written
    assert {e["type"] for e in batched[0]} == {"ADDED"}
    # A client that did not ask for batches (another gRPC client) gets one map per event.
    single = await asyncio.wait_for(_raw_watch(shared_cluster.api_target, namespace, start,
                                               40, batch=False), 20)
    assert len(single) == 40 and all(isinstance(m, dict) for m in single)
    # skiff.client unpacks batches into the same events in the same order.
    events = await _collect(api, namespace, start, 40)
    assert [int(e.resource_version) for e in events] == written
