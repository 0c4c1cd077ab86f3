"""CT1 `record: true` (issue 35 part 2): the journal of one identity's requests — bounded
to the newest entries with a `dropped` count, read `sinceSeq` — and, through the registry's
hooks on the in-memory store, exactly that identity's reads (with served/head revisions),
watches, delivered events and committed writes; another identity's are absent, and
deleting the Perturbation drops the journal."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from skiff.api import ApiError, lookup
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.events import HeldEvents
from skiff.apiserver.perturbation.journal import (
    Journal,
    read_entry,
    record_object,
    write_entry,
)
from skiff.apiserver.perturbation.rules import Effective, parse
from skiff.apiserver.storage.watchcache import WatchEvent
from skiff.auth import UserInfo
from tests.unit.apiserver.perturbation.helpers import applied, cm, pert, running_registry


def test_ct1_record_journal_keeps_the_newest_entries_and_counts_the_dropped() -> None:
    journal = Journal(limit=3)
    for i in range(5):
        journal.add("write", {"i": i}, now=100.0 + i)
    assert journal.dropped == 2
    assert [(e["seq"], e["i"], e["time"]) for e in journal.since()] == [
        (3, 2, 102.0), (4, 3, 103.0), (5, 4, 104.0)]
    assert [e["seq"] for e in journal.since(3)] == [4, 5]
    assert [e["seq"] for e in journal.since(1)] == [3, 4, 5]  # older ones are gone
    assert journal.since(5) == []
    record = record_object("p", apiserver="a:1", journal=journal, since_seq=4)
    assert record == {"apiVersion": "skiff.io/v1", "kind": "PerturbationRecord",
                      "metadata": {"name": "p"}, "apiserver": "a:1", "dropped": 2,
                      "entries": [journal.since()[-1]]}


def test_ct1_record_entries_name_the_resource_and_what_was_asked() -> None:
    dbs = lookup("deployments")
    listed = {"metadata": {"resourceVersion": "9"}, "items": [
        {"metadata": {"namespace": "ns", "name": f"d{i}", "resourceVersion": str(i)}}
        for i in range(501)]}
    entry = read_entry("list", dbs, "ns", "", kw={"allow_cached": True,
                                                   "label_selector": "app=x"},
                       served=5, head=9, stale=True, result=listed)
    assert {k: entry[k] for k in ("verb", "resource", "namespace", "name", "resourceVersion",
                                  "servedRevision", "headRevision", "stale",
                                  "labelSelector", "truncated")} == {
        "verb": "list", "resource": "deployments.apps", "namespace": "ns", "name": "",
        "resourceVersion": "0", "servedRevision": 5, "headRevision": 9, "stale": True,
        "labelSelector": "app=x", "truncated": True}
    assert len(entry["items"]) == 500
    assert entry["items"][0] == {"namespace": "ns", "name": "d0", "resourceVersion": "0"}
    newer = read_entry("get", lookup("configmaps"), None, "c", kw={
        "allow_cached": True, "revision": 7}, served=7, head=9, stale=False, result=None)
    assert (newer["resourceVersion"], newer["resourceVersionMatch"], newer["found"],
            newer["objectRevision"]) == ("7", "NotOlderThan", False, 0)
    wrote = write_entry(lookup("configmaps"), "create", {"metadata": {
        "namespace": "ns", "name": "cm-x1", "generateName": "cm-", "resourceVersion": "12"}})
    assert wrote == {"verb": "create", "subresource": "", "resource": "configmaps",
                     "namespace": "ns", "name": "cm-x1", "revision": 12,
                     "generateName": "cm-"}


def _ops(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in entries:
        if e["op"] == "read":
            out.append(("read", e["verb"], e["name"], e["resourceVersion"]))
        elif e["op"] == "watch":
            out.append(("watch", e["resourceVersion"]))
        elif e["op"] == "event":
            out.append(("event", e["type"], e["name"], e["fate"]))
        else:
            out.append((e["op"], e.get("verb"), e.get("name")))
    return out


async def test_ct1_record_journals_one_identitys_reads_watches_and_writes() -> None:
    async with running_registry() as registry:
        first = await registry.create("configmaps", "default", cm("a"))
        rev_a = int(first.object["metadata"]["resourceVersion"])
        made = await registry.create("perturbations", None, pert(
            subject={"user": "op"}, record=True))
        await applied(registry, "p")
        current_user.set(UserInfo("someone-else"))
        await registry.list("configmaps", "default", allow_cached=True)
        await registry.create("configmaps", "default", cm("other"))
        current_user.set(UserInfo("op"))
        listed = await registry.list("configmaps", "default", allow_cached=True)
        await registry.get("configmaps", "default", "a", allow_cached=False)
        with pytest.raises(ApiError):
            await registry.get("configmaps", "default", "nope", allow_cached=False)
        await registry.get("configmaps", "default", "a")  # the registry's own: not journaled
        watch = registry.watch_batches("configmaps", "default",
                                       resource_version=listed["metadata"]["resourceVersion"])
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        await asyncio.sleep(0.1)
        b = await registry.create("configmaps", "default", cm("b"))
        batch = await asyncio.wait_for(pending, 3)
        assert [ev.type for ev in batch] == ["ADDED"]
        await registry.update("configmaps", "default", cm("b", "1"), name="b")
        batch = await asyncio.wait_for(anext(watch), 3)
        assert [ev.type for ev in batch] == ["MODIFIED"]
        await watch.aclose()
        record = registry.perturbations.record(made.object)
        entries = record["entries"]
        assert _ops(entries) == [
            ("read", "list", "", "0"), ("read", "get", "a", ""), ("read", "get", "nope", ""),
            ("watch", listed["metadata"]["resourceVersion"]),
            ("write", "create", "b"), ("event", "ADDED", "b", "delivered"),
            ("write", "update", "b"), ("event", "MODIFIED", "b", "delivered")]
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
        assert [i["name"] for i in entries[0]["items"]] == ["a", "other"]
        assert entries[0]["stale"] is False
        assert (entries[1]["found"], entries[1]["objectRevision"]) == (True, rev_a)
        assert entries[2]["found"] is False
        write = next(e for e in entries if e["op"] == "write")
        assert write["revision"] == int(b.object["metadata"]["resourceVersion"])
        assert registry.perturbations.record(made.object, since_seq=6)["entries"] == \
            entries[6:]
        await registry.delete("perturbations", None, "p")
        await applied(registry, "p", present=False)
        assert registry.perturbations.record(made.object)["entries"] == []


async def test_ct1_record_beside_a_stale_view_marks_stale_reads_and_held_events() -> None:
    async with running_registry() as registry:
        first = await registry.create("configmaps", "default", cm("a"))
        pinned = int(first.object["metadata"]["resourceVersion"])
        made = await registry.create("perturbations", None, pert(
            subject={"user": "op"}, record=True, staleView={"revision": pinned}))
        await applied(registry, "p")
        await registry.create("configmaps", "default", cm("b"))
        current_user.set(UserInfo("op"))
        stale = await registry.list("configmaps", "default", allow_cached=True)
        assert [i["metadata"]["name"] for i in stale["items"]] == ["a"]
        watch = registry.watch_batches("configmaps", "default",
                                       resource_version=str(pinned))
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        await asyncio.sleep(0.3)
        assert not pending.done()
        entries = registry.perturbations.record(made.object)["entries"]
        read = entries[0]
        assert (read["servedRevision"], read["stale"]) == (pinned, True)
        assert read["headRevision"] > pinned
        assert [(e["op"], e.get("fate")) for e in entries[1:]] == [("watch", None),
                                                                  ("event", "held")]
        await registry.delete("perturbations", None, "p")  # heals: the held event flows
        batch = await asyncio.wait_for(pending, 3)
        assert batch[0].object["metadata"]["name"] == "b"
        await watch.aclose()


async def test_ct1_record_journals_failed_writes_with_code_and_reason() -> None:
    async with running_registry() as registry:
        made = await registry.create("perturbations", None, pert(
            subject={"user": "op"}, record=True))
        await applied(registry, "p")
        current_user.set(UserInfo("op"))
        await registry.create("configmaps", "default", cm("a"))
        with pytest.raises(ApiError):
            await registry.create("configmaps", "default", cm("a"))
        stale = cm("a", "2")
        stale["metadata"]["resourceVersion"] = "1"
        with pytest.raises(ApiError):
            await registry.update("configmaps", "default", stale, name="a")
        with pytest.raises(ApiError):
            await registry.delete("configmaps", "default", name="nope")
        entries = registry.perturbations.record(made.object)["entries"]
    assert [(e["verb"], e["name"], e.get("code"), e.get("reason")) for e in entries] == [
        ("create", "a", None, None), ("create", "a", 409, "AlreadyExists"),
        ("update", "a", 409, "Conflict"), ("delete", "nope", 404, "NotFound")]
    assert "revision" not in entries[1] and entries[1]["namespace"] == "default"


async def test_ct1_record_closing_a_recorded_watch_releases_its_cache_watcher() -> None:
    async with running_registry() as registry:
        await registry.create("perturbations", None, pert(subject={"user": "op"},
                                                           record=True))
        await applied(registry, "p")
        before = len(registry.cache._subscribers)
        current_user.set(UserInfo("op"))
        listed = await registry.list("configmaps", "default")
        watch = registry.watch_batches("configmaps", "default",
                                       resource_version=listed["metadata"]["resourceVersion"])
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        await registry.create("configmaps", "default", cm("a"))
        await asyncio.wait_for(pending, 3)
        assert len(registry.cache._subscribers) == before + 1
        await watch.aclose()
        async with asyncio.timeout(2):  # the cache's generator is finalized by the loop
            while len(registry.cache._subscribers) != before:
                await asyncio.sleep(0.01)


def test_ct1_record_event_fates_missed_held_coalesced() -> None:
    rule = parse(pert(subject={"user": "op"}, missedEvents={
        "types": ["MODIFIED"], "names": ["web-0"], "coalesceSeconds": 2}))
    dropped = parse(pert(name="q", subject={"user": "op"}, missedEvents={
        "types": ["DELETED"]}))
    assert rule is not None and dropped is not None
    told: list[tuple[str, int, str]] = []
    held = HeldEvents(lookup("configmaps"),
                      lambda ev, fate: told.append((ev.type, ev.revision, fate)))
    effective = Effective((rule, dropped))

    def ev(kind: str, name: str, rev: int) -> WatchEvent:
        return WatchEvent(kind, {"metadata": {"name": name, "namespace": "default"}}, rev)

    for event in (ev("MODIFIED", "web-0", 5), ev("MODIFIED", "web-0", 6),
                  ev("ADDED", "web-1", 7), ev("DELETED", "web-1", 8)):
        held.admit(event, effective, view=0, now=0.0)
    assert held.release(view=0, now=1.0) == []
    assert told == [("MODIFIED", 5, "held"), ("MODIFIED", 5, "coalesced"),
                    ("MODIFIED", 6, "held"), ("DELETED", 8, "missed"),
                    ("ADDED", 7, "held")]  # behind the coalesced one: waits for it
    assert [e.revision for e in held.release(view=0, now=2.5)] == [6, 7]


async def test_ct1_record_journals_a_crash_on_write_firing() -> None:
    victim = subprocess.Popen(["sleep", "30"])
    try:
        async with running_registry() as registry:
            made = await registry.create("perturbations", None, pert(
                subject={"user": "op"}, record=True,
                crashOnWrite={"after": 1, "target": {"pid": victim.pid}}))
            await applied(registry, "p")
            current_user.set(UserInfo("op"))
            wrote = await registry.create("configmaps", "default", cm("a"))
            async with asyncio.timeout(5):
                while len(registry.perturbations.record(made.object)["entries"]) < 2:
                    await asyncio.sleep(0.02)
            write, crash = registry.perturbations.record(made.object)["entries"]
        assert victim.wait(5) == -9
    finally:
        victim.kill()
    revision = int(wrote.object["metadata"]["resourceVersion"])
    assert (write["op"], write["revision"]) == ("write", revision)
    assert {k: crash[k] for k in ("op", "perturbation", "revision", "target", "killed")} == {
        "op": "crash", "perturbation": "p", "revision": revision,
        "target": f"pid {victim.pid}", "killed": True}
    assert f"killed process {victim.pid}" in crash["message"]


async def test_ct1_record_reaches_a_watch_opened_before_the_perturbation() -> None:
    async with running_registry() as registry:
        current_user.set(UserInfo("op"))
        listed = await registry.list("configmaps", "default")
        watch = registry.watch_batches("configmaps", "default",
                                       resource_version=listed["metadata"]["resourceVersion"])
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        await registry.create("configmaps", "default", cm("before"))
        assert [e.object["metadata"]["name"] for e in await asyncio.wait_for(pending, 3)] \
            == ["before"]
        made = await registry.create("perturbations", None, pert(subject={"user": "op"},
                                                                 record=True))
        await applied(registry, "p")
        # the batch that carries the Perturbation's own event (not the watch's resource)
        # is not seen; the next one is the first journaled
        pending = asyncio.ensure_future(anext(watch))
        current_user.set(UserInfo("admin"))  # the watch keeps its own user
        await registry.create("configmaps", "default", cm("after"))
        assert [e.object["metadata"]["name"] for e in await asyncio.wait_for(pending, 3)] \
            == ["after"]
        await watch.aclose()
        entries = registry.perturbations.record(made.object)["entries"]
    assert [(e["op"], e.get("name")) for e in entries] == [
        ("watch", ""), ("event", "after")]
    assert entries[0]["resourceVersion"] == listed["metadata"]["resourceVersion"]
