"""The in-memory Client answers as the apiserver does where controllers depend on it."""

from __future__ import annotations

import asyncio

import pytest

from skiff.api import ApiError, Reason
from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.client.fake import Action, FakeClient
from skiff.clock import FakeClock


def config_map(name: str, *, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "data": {"k": "v"}}


def fence(name: str) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Fence",
            "metadata": {"name": name, "finalizers": ["skiff.io/fence-agent"]},
            "spec": {"nodeName": name, "agent": "power"}, "status": {"phase": "Pending"}}


async def test_create_get_and_the_errors_of_missing_and_existing_objects() -> None:
    api = FakeClient(clock=FakeClock())
    created = await api.create(config_map("a"))
    assert created["metadata"]["resourceVersion"] and created["metadata"]["uid"]
    assert await api.get("configmaps", "a", "ns") == created
    with pytest.raises(ApiError) as exists:
        await api.create(config_map("a"))
    with pytest.raises(ApiError) as missing:
        await api.get("configmaps", "b", "ns")
    assert (exists.value.reason, missing.value.reason) == (Reason.ALREADY_EXISTS,
                                                           Reason.NOT_FOUND)


async def test_a_stale_resource_version_is_a_conflict() -> None:
    api = FakeClient(config_map("a"))
    first = await api.get("configmaps", "a", "ns")
    await api.update({**first, "data": {"k": "new"}})
    with pytest.raises(ApiError) as stale:
        await api.update({**first, "data": {"k": "lost"}})
    assert stale.value.reason == Reason.CONFLICT
    assert (await api.get("configmaps", "a", "ns"))["data"] == {"k": "new"}


async def test_update_keeps_the_status_and_update_status_only_writes_it() -> None:
    api = FakeClient(fence("node-1"))
    current = await api.get("fences", "node-1")
    updated = await api.update({**current, "status": {"phase": "Fenced"}})
    assert updated["status"] == {"phase": "Pending"}
    written = await api.update_status({**updated, "spec": {}, "status": {"phase": "Fenced"}})
    assert written["status"] == {"phase": "Fenced"} and written["spec"]["agent"] == "power"
    assert [a.verb for a in api.actions] == ["get", "update", "update_status"]


async def test_finalizers_hold_a_deleted_object_until_they_are_removed() -> None:
    api = FakeClient(fence("node-1"))
    answer = await api.delete("fences", "node-1")
    assert answer["deleted"] is False
    held = await api.get("fences", "node-1")
    assert held["metadata"]["deletionTimestamp"]
    await api.update({**held, "metadata": {**held["metadata"], "finalizers": []}})
    assert api.stored("fences", "node-1") is None


async def test_list_filters_by_label_and_field_selectors() -> None:
    api = FakeClient(config_map("a", labels={"app": "web"}), config_map("b"),
                     make_pod("p").namespace("ns").node("node-1").obj(),
                     make_pod("q").namespace("ns").obj())
    web = await api.list("configmaps", "ns", label_selector="app=web")
    on_node = await api.list("pods", "ns", field_selector="spec.nodeName=node-1")
    assert [o["metadata"]["name"] for o in web["items"]] == ["a"]
    assert [o["metadata"]["name"] for o in on_node["items"]] == ["p"]


async def test_a_reactor_answers_or_fails_a_verb_first() -> None:
    api = FakeClient(config_map("a"))

    def refuse(action: Action) -> Obj | None:
        raise ApiError(Reason.FORBIDDEN, f"no {action.verb}")

    api.prepend_reactor("update", "configmaps", refuse)
    with pytest.raises(ApiError, match="no update"):
        await api.update(await api.get("configmaps", "a", "ns"))
    assert len(api.calls("update", "configmaps")) == 1


async def test_watch_replays_from_a_resource_version_then_follows() -> None:
    api = FakeClient(config_map("a"))
    since = (await api.list("configmaps", "ns"))["metadata"]["resourceVersion"]
    await api.create(config_map("b"))
    stream = api.watch("configmaps", "ns", resource_version=since)
    first = await anext(stream)
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    await api.delete("configmaps", "a", "ns")
    second = await asyncio.wait_for(pending, 1.0)
    await stream.aclose()
    assert [(e.type, e.object["metadata"]["name"]) for e in (first, second)] == [
        ("ADDED", "b"), ("DELETED", "a")]


async def test_a_scheduled_pod_terminates_until_deleted_again_with_grace_zero() -> None:
    api = FakeClient(make_pod("p").namespace("ns").node("node-1").obj())
    first = await api.delete("pods", "p", "ns")
    assert first["deleted"] is False
    assert first["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
    again = await api.delete("pods", "p", "ns", grace_period_seconds=0)
    assert again["deleted"] is True and api.stored("pods", "p", "ns") is None


async def test_bind_sets_the_node_once() -> None:
    api = FakeClient(make_pod("p").namespace("ns").obj())
    await api.bind("ns", "p", "node-1")
    with pytest.raises(ApiError) as twice:
        await api.bind("ns", "p", "node-2")
    assert twice.value.reason == Reason.CONFLICT
    assert (await api.get("pods", "p", "ns"))["spec"]["nodeName"] == "node-1"
    assert api.calls("bind", failed=True)[0].name == "p"
