"""A Perturbation's decisions (issue 35, part 1): whom it targets, the revision a stale
view serves (pinned, lagging by revisions or seconds, with a fake clock), which events a
watcher misses or gets coalesced, always in resourceVersion order; and the store's hooks
on the in-memory store: only the targeted identity's cached reads and watches change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from skiff.api import ApiError, Reason, lookup
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.events import HeldEvents
from skiff.apiserver.perturbation.rules import (
    Effective,
    RevisionTimes,
    StaleView,
    parse,
    view_revision,
)
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache, WatchEvent
from skiff.auth import UserInfo

CONFIGMAPS = lookup("configmaps")


def _pert(name: str = "p", **spec: Any) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
            "spec": spec}


def _effective(**spec: Any) -> Effective:
    rule = parse(_pert(subject={"user": "op"}, **spec))
    assert rule is not None
    return Effective((rule,))


def _ev(kind: str, name: str, rev: int, value: str = "") -> WatchEvent:
    return WatchEvent(kind, {"kind": "ConfigMap", "metadata": {
        "name": name, "namespace": "default", "resourceVersion": str(rev)},
        "data": {"v": value}}, rev)


def _seen(events: list[WatchEvent]) -> list[tuple[str, str, int]]:
    return [(e.type, e.object["metadata"].get("name", ""), e.revision) for e in events]


def test_pert_parse_needs_one_subject_and_something_to_do() -> None:
    assert parse(_pert(subject={"user": "a", "group": "g"}, staleView={"revision": 3})) is None
    assert parse(_pert(subject={"user": "a"})) is None
    rule = parse(_pert(subject={"group": "g"}, missedEvents={"types": ["MODIFIED"]}))
    assert rule is not None and rule.group == "g" and rule.missed is not None


def test_pert_pinned_and_lagging_views_with_a_fake_clock() -> None:
    times = RevisionTimes()
    assert view_revision(StaleView(revision=7), head=50, times=times, now=0) == 7
    assert view_revision(StaleView(lag_revisions=20), head=50, times=times, now=0) == 30
    assert view_revision(StaleView(lag_revisions=80), head=50, times=times, now=0) == 1
    for t, rev in ((100.0, 10), (101.0, 12), (103.0, 20), (104.5, 25)):
        times.record(revision=rev, now=t)
    lag = StaleView(lag_seconds=2)
    # the newest revision at least 2 s old at t=105 is the one seen at 103
    assert view_revision(lag, head=25, times=times, now=105.0) == 20
    assert view_revision(lag, head=25, times=times, now=103.5) == 12
    # older than anything recorded: the oldest known revision
    assert view_revision(lag, head=25, times=times, now=100.5) == 10


def test_pert_stale_view_holds_events_and_bookmarks_past_the_view() -> None:
    held = HeldEvents(CONFIGMAPS)
    eff = _effective(staleView={"revision": 11})
    for ev in (_ev("ADDED", "a", 10), _ev("ADDED", "b", 12), _ev("MODIFIED", "a", 13),
               WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "14"}}, 14)):
        held.admit(ev, eff, view=11, now=0)
    assert _seen(held.release(view=11, now=0)) == [("ADDED", "a", 10)]
    assert _seen(held.release(view=12, now=0)) == [("ADDED", "b", 12)]
    assert _seen(held.release_all()) == [("MODIFIED", "a", 13)]  # no bookmark past the view


def test_pert_missed_events_drops_only_matching_events() -> None:
    held = HeldEvents(CONFIGMAPS)
    eff = _effective(missedEvents={"types": ["MODIFIED"], "names": ["default/a"]})
    for ev in (_ev("ADDED", "a", 1), _ev("MODIFIED", "a", 2), _ev("MODIFIED", "b", 3),
               _ev("DELETED", "a", 4)):
        held.admit(ev, eff, view=0, now=0)
    assert _seen(held.release(view=0, now=0)) == [
        ("ADDED", "a", 1), ("MODIFIED", "b", 3), ("DELETED", "a", 4)]
    other = _effective(missedEvents={"resources": ["pods"]})
    assert other.missing(CONFIGMAPS, _ev("MODIFIED", "a", 5)) is None


def test_pert_coalesce_delivers_latest_state_after_delay_in_order() -> None:
    held = HeldEvents(CONFIGMAPS)
    eff = _effective(missedEvents={"types": ["MODIFIED"], "names": ["a"],
                                   "coalesceSeconds": 2})
    held.admit(_ev("MODIFIED", "a", 5, "1"), eff, view=0, now=10.0)
    held.admit(_ev("MODIFIED", "b", 6), eff, view=0, now=10.1)  # behind the held one
    held.admit(_ev("MODIFIED", "a", 7, "2"), eff, view=0, now=10.5)
    held.admit(_ev("MODIFIED", "a", 8, "3"), eff, view=0, now=11.0)
    # a's first state left the queue: b is at the head, and a's latest behind it
    assert _seen(held.release(view=0, now=11.5)) == [("MODIFIED", "b", 6)]
    assert held.release(view=0, now=11.9) == []
    out = held.release(view=0, now=12.0)  # the group's delay counts from its first event
    assert _seen(out) == [("MODIFIED", "a", 8)] and out[0].object["data"] == {"v": "3"}


def test_pert_coalesce_keeps_order_behind_a_held_event() -> None:
    held = HeldEvents(CONFIGMAPS)
    eff = _effective(missedEvents={"names": ["a"], "coalesceSeconds": 1})
    held.admit(_ev("ADDED", "a", 1), eff, view=0, now=0)
    held.admit(_ev("ADDED", "b", 2), eff, view=0, now=0)
    assert held.release(view=0, now=0.5) == []  # b waits behind a: never out of order
    assert _seen(held.release(view=0, now=1.0)) == [("ADDED", "a", 1), ("ADDED", "b", 2)]
    held.admit(_ev("ADDED", "a", 3), eff, view=0, now=2)
    held.admit(_ev("DELETED", "a", 4), eff, view=0, now=2.1)
    assert held.release(view=0, now=5) == []  # added then deleted unseen: nothing to tell


def _cm(name: str, value: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": value}}


async def test_pert_store_hooks_change_only_the_targeted_identity() -> None:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        first = await registry.create("configmaps", "default", _cm("a", "1"))
        pinned = int(first.object["metadata"]["resourceVersion"])
        await registry.create("perturbations", None, _pert(
            subject={"user": "op"}, staleView={"revision": pinned}))
        async with asyncio.timeout(3):
            while not registry.perturbations:
                await asyncio.sleep(0.01)
        await registry.create("configmaps", "default", _cm("b", "1"))
        current_user.set(UserInfo("op"))
        stale = await registry.list("configmaps", "default", allow_cached=True)
        assert [i["metadata"]["name"] for i in stale["items"]] == ["a"]
        assert stale["metadata"]["resourceVersion"] == str(pinned)
        fresh = await registry.list("configmaps", "default")
        assert [i["metadata"]["name"] for i in fresh["items"]] == ["a", "b"]
        watch = registry.watch_batches("configmaps", "default", resource_version=str(pinned))
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        done, _ = await asyncio.wait({pending}, timeout=0.5)
        assert not done  # b is past the pinned view: held
        current_user.set(UserInfo("someone-else"))
        other = await registry.list("configmaps", "default", allow_cached=True)
        assert len(other["items"]) == 2
        await registry.delete("perturbations", None, "p")  # heals: the held event flows
        batch = await asyncio.wait_for(pending, 3)
        assert _seen(batch) == [("ADDED", "b", pinned + 2)]
        await watch.aclose()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_pert_missed_events_watch_ends_gone_when_the_perturbation_is_deleted() -> None:
    """Healed, a watch that missed events ends with 410 Gone: its client lists again, so
    what it missed reaches it (a re-watch from its last resourceVersion would not)."""
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        made = await registry.create("configmaps", "default", _cm("a", "1"))
        await registry.create("perturbations", None, _pert(
            subject={"group": "ops"}, missedEvents={"types": ["MODIFIED"]}))
        async with asyncio.timeout(3):
            while not registry.perturbations:
                await asyncio.sleep(0.01)
        current_user.set(UserInfo("op", groups=("ops",)))
        watch = registry.watch("configmaps", "default",
                               resource_version=made.object["metadata"]["resourceVersion"])
        await registry.update("configmaps", "default", _cm("a", "2"), name="a")
        await registry.create("configmaps", "default", _cm("b", "1"))
        first = await asyncio.wait_for(anext(watch), 3)
        assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "b")
        await registry.create("perturbations", None, _pert(
            name="rec", subject={"group": "ops"}, record=True))
        await registry.delete("perturbations", None, "p")  # the record stays: still healed
        with pytest.raises(ApiError) as gone:
            async with asyncio.timeout(3):
                rest = [ev async for ev in watch if ev.type != "BOOKMARK"]
                assert rest == []
        assert gone.value.reason == Reason.GONE
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_pert_compacted_stale_view_serves_the_oldest_revision_held() -> None:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        first = await registry.create("configmaps", "default", _cm("a", "1"))
        pinned = int(first.object["metadata"]["resourceVersion"])
        await registry.create("perturbations", None, _pert(
            subject={"user": "op"}, staleView={"revision": pinned}))
        second = await registry.create("configmaps", "default", _cm("b", "1"))
        floor = int(second.object["metadata"]["resourceVersion"])
        await registry.create("configmaps", "default", _cm("c", "1"))
        await store.compact(floor)
        async with asyncio.timeout(3):
            while not registry.perturbations:
                await asyncio.sleep(0.01)
        current_user.set(UserInfo("op"))
        stale = await registry.list("configmaps", "default", allow_cached=True)
        assert stale["metadata"]["resourceVersion"] == str(floor)  # not Gone: the oldest
        assert [i["metadata"]["name"] for i in stale["items"]] == ["a", "b"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
