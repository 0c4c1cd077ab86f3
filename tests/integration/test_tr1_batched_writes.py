"""SPEC TR1 against a real etcd and apiserver: a `Batch` call's items are each their own
write — their own etcd transaction and resourceVersion, their own answer, in the order sent
for one object — and a batching client reads exactly like one that is not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.rpc import decode_maps, encode, method_path
from tests.integration.cluster import Cluster


def _configmap(name: str, namespace: str, **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def _item(method: str, obj: Obj, **extra: object) -> Obj:
    meta = obj["metadata"]
    return {"method": method, "resource": "configmaps", "namespace": meta["namespace"],
            "object": obj, **extra}


@pytest.fixture
async def batching(shared_cluster: Cluster) -> AsyncIterator[ApiClient]:
    client = ApiClient(shared_cluster.api_target, retry_seconds=20, batch=True,
                       batch_items=50, batch_delay=0.05,
                       batch_resources=frozenset({"configmaps"}))
    yield client
    await client.close()


async def test_tr1_batch_answers_each_item_with_its_own_result(api: ApiClient,
                                                              namespace: str) -> None:
    await api.create(_configmap("taken", namespace))
    items = [_item("Create", _configmap(f"cm-{i}", namespace, i=str(i))) for i in range(5)]
    items.insert(2, _item("Create", _configmap("taken", namespace)))
    items.insert(4, _item("Create", _configmap("Not_A_Name", namespace)))
    items.append({"method": "Delete", "resource": "configmaps", "namespace": namespace,
                  "name": "cm-0"})
    results = (await api.call("Batch", {"items": items}))["results"]

    assert len(results) == len(items)
    assert results[2]["error"]["reason"] == "AlreadyExists"
    assert results[4]["error"]["reason"] == "Invalid"
    assert "metadata.name" in results[4]["error"]["message"]
    assert results[-1]["error"]["reason"] == "BadRequest"
    assert "cannot be batched" in results[-1]["error"]["message"]
    created = [r["ok"]["object"] for i, r in enumerate(results) if i not in (2, 4, 7)]
    assert [o["metadata"]["name"] for o in created] == [f"cm-{i}" for i in range(5)]
    # one etcd transaction each: five distinct resourceVersions, each the stored one
    versions = {o["metadata"]["resourceVersion"] for o in created}
    assert len(versions) == 5
    stored = await api.list("configmaps", namespace)
    assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for o in stored["items"] if o["metadata"]["name"].startswith("cm-")} == {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in created}


async def test_tr1_batch_keeps_the_order_of_one_objects_writes(api: ApiClient,
                                                               namespace: str) -> None:
    first = _configmap("ordered", namespace, step="0")
    items = [_item("Create", first)]
    for step in range(1, 6):
        # each update names no resourceVersion: it applies on top of the one before it
        items.append(_item("Update", _configmap("ordered", namespace, step=str(step))))
    items += [_item("Create", _configmap(f"other-{i}", namespace)) for i in range(20)]
    start = (await api.list("configmaps", namespace))["metadata"]["resourceVersion"]
    results = (await api.call("Batch", {"items": items}))["results"]
    assert all("ok" in r for r in results), results

    steps = [r["ok"]["object"]["data"]["step"] for r in results[:6]]
    assert steps == [str(s) for s in range(6)]
    revisions = [int(r["ok"]["object"]["metadata"]["resourceVersion"]) for r in results[:6]]
    assert revisions == sorted(revisions) and len(set(revisions)) == 6
    history = await api.history("configmaps", "ordered", namespace)
    assert [h["object"]["data"]["step"] for h in history] == [str(s) for s in range(6)]
    # a watch from before the batch sees the object's six versions in that order
    seen: list[str] = []
    async for event in api.watch("configmaps", namespace, resource_version=start,
                                 field_selector="metadata.name=ordered"):
        seen.append(event.object["data"]["step"])
        if len(seen) == 6:
            break
    assert seen == [str(s) for s in range(6)]


async def test_tr1_a_batching_client_reads_like_one_that_is_not(batching: ApiClient,
                                                                namespace: str) -> None:
    await batching.create(_configmap("exists", namespace))
    batcher = batching.batcher
    assert batcher is not None
    before = batcher.batches

    async def create(i: int) -> Obj | ApiError:
        name = "exists" if i == 7 else f"many-{i}"
        try:
            return await batching.create(_configmap(name, namespace, i=str(i)))
        except ApiError as err:
            return err

    answers = await asyncio.gather(*(create(i) for i in range(40)))
    assert batcher.batches - before == 1, "40 writes made together share one call"
    error = answers[7]
    assert isinstance(error, ApiError) and error.reason == Reason.ALREADY_EXISTS
    for i, answer in enumerate(answers):
        if i != 7:
            assert isinstance(answer, dict) and answer["data"] == {"i": str(i)}

    # a conflict reaches its own caller as it would without batching
    current = answers[0]
    assert isinstance(current, dict)
    stale = {**current, "data": {"i": "stale"}}
    await batching.update({**current, "data": {"i": "fresh"}})
    with pytest.raises(ApiError) as err:
        await batching.update(stale)
    assert err.value.reason == Reason.CONFLICT
    # generateName is never batched (a resend would create it twice)
    made = await batching.create({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"generateName": "gen-", "namespace": namespace}})
    assert made["metadata"]["name"].startswith("gen-")


async def test_tr1_resent_batch_answers_landed_items_as_landed(api: ApiClient,
                                                              namespace: str) -> None:
    items = [_item("Create", _configmap(f"re-{i}", namespace, i=str(i))) for i in range(3)]
    first = (await api.call("Batch", {"items": items}))["results"]
    assert all("ok" in r for r in first)
    # the same items again, as a client sends them when the first answer was lost
    again = (await api.call("Batch", {"items": items, "resent": True}))["results"]
    assert [r["ok"]["object"]["metadata"]["uid"] for r in again] == [
        r["ok"]["object"]["metadata"]["uid"] for r in first]
    # not resent: the duplicate is the caller's own AlreadyExists
    plain = (await api.call("Batch", {"items": items[:1]}))["results"]
    assert plain[0]["error"]["reason"] == "AlreadyExists"
    # resent, but somebody else's object of that name: still AlreadyExists
    other = _item("Create", _configmap("re-0", namespace, i="someone else"))
    assert (await api.call("Batch", {"items": [other], "resent": True})
            )["results"][0]["error"]["reason"] == "AlreadyExists"
    stored = await api.list("configmaps", namespace)
    assert len([o for o in stored["items"] if o["metadata"]["name"].startswith("re-")]) == 3


async def test_tr1_batch_refuses_a_malformed_batch_with_a_clear_error(
        api: ApiClient) -> None:
    for request, words in (({}, "items: Required value"),
                           ({"items": []}, "items: Required value"),
                           ({"items": [{"method": "Create"}] * 1001}, "at most 1000"),
                           ({"items": ["not a map"]}, None)):
        if words is None:
            results = (await api.call("Batch", request))["results"]
            assert results[0]["error"]["message"] == "items[0]: must be a map"
            continue
        with pytest.raises(ApiError) as err:
            await api.call("Batch", request)
        assert err.value.reason == Reason.BAD_REQUEST
        assert words in err.value.message
        assert "Traceback" not in err.value.message


async def test_tr1_a_busy_watch_message_carries_several_events_in_revision_order(
        api: ApiClient, namespace: str) -> None:
    """Watch frames (the gRPC message a client decodes with `decode_maps`): a burst of
    writes queued for a watcher arrives in fewer messages than events, every event once, in
    revision order; a lone write on an idle stream comes at once, alone.

    The burst is committed before the watch opens from the revision before it, so all 60
    events are queued for the watcher when it first wakes, however the machine's load
    spreads the commits (a watch that was open during the burst got each commit alone when
    CI's load made etcd deliver them one by one)."""
    start = (await api.list("configmaps", namespace))["metadata"]["resourceVersion"]
    burst = [_item("Create", _configmap(f"burst-{i}", namespace)) for i in range(60)]
    results = (await api.call("Batch", {"items": burst}))["results"]
    stub = api._channel.unary_stream(method_path("Watch"))  # the frames, not the events
    call = stub(encode({"resource": "configmaps", "namespace": namespace, "batch": True,
                        "options": {"resourceVersion": start,
                                    "allowWatchBookmarks": False}}))
    frames: list[list[Obj]] = []

    async def read(count: int) -> None:
        seen = sum(len(f) for f in frames)
        async for data in call:
            frames.append(decode_maps(data))
            seen += len(frames[-1])
            if seen >= count:
                return

    try:
        await asyncio.wait_for(read(60), 30)
        events = [e for frame in frames for e in frame]
        assert len(frames) < len(events) == 60
        revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert revisions == sorted(revisions)
        assert sorted(revisions) == sorted(
            int(r["ok"]["object"]["metadata"]["resourceVersion"]) for r in results)

        await asyncio.sleep(0.5)  # idle again
        before = len(frames)
        await api.create(_configmap("alone", namespace))
        await asyncio.wait_for(read(61), 5)
        assert len(frames) == before + 1 and frames[-1][0]["object"]["metadata"][
            "name"] == "alone"
    finally:
        call.cancel()


class _AnswerLost:
    """A gRPC stub whose first call reaches the apiserver but whose answer never reaches
    the client (the apiserver went away, or the deadline passed, after the write landed)."""

    def __init__(self, real: grpc.aio.UnaryUnaryMultiCallable) -> None:
        self.real = real
        self.calls = 0

    async def __call__(self, data: bytes, **kwargs: object) -> bytes:
        self.calls += 1
        answer: bytes = await self.real(data, **kwargs)
        if self.calls == 1:
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), details="connection reset")
        return answer


async def test_tr1_a_write_retried_after_its_answer_was_lost_is_answered_as_landed(
        shared_cluster: Cluster, namespace: str) -> None:
    """A single Create or Update whose first try landed but whose answer was lost is
    resent marked so (a one-item resent Batch): the client gets the stored object, not
    AlreadyExists or Conflict from its own first try, and the write is stored once."""
    async with ApiClient(shared_cluster.api_target, retry_seconds=20) as client:
        for method in ("Create", "Update"):
            client._unary[method] = _AnswerLost(
                client._channel.unary_unary(method_path(method)))
        made = await client.create(_configmap("lost-answer", namespace, v="1"))
        assert client._unary["Create"].calls == 1  # the retry went as a resent Batch
        stored = await client.get("configmaps", "lost-answer", namespace)
        assert made["metadata"]["uid"] == stored["metadata"]["uid"]
        assert made["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

        updated = await client.update({**stored, "data": {"v": "2"}})
        again = await client.get("configmaps", "lost-answer", namespace)
        assert updated["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]
        assert again["data"] == {"v": "2"}
        # someone else's object of the name is not taken for the lost write's
        await client.create(_configmap("lost-other", namespace, v="theirs"))
        client._unary["Create"] = _AnswerLost(client._channel.unary_unary(method_path("Create")))
        client._unary["Create"].calls = 1  # answers arrive from here on
        with pytest.raises(ApiError) as err:
            await client.create(_configmap("lost-other", namespace, v="mine"))
        assert err.value.reason == Reason.ALREADY_EXISTS
