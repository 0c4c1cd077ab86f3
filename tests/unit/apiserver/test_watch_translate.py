"""SPEC AS5: how one etcd change looks to a (possibly filtered) watcher."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import lookup
from skiff.api.testing import make_pod
from skiff.apiserver.storage.values import RawEvent
from skiff.apiserver.storage.watchcache import WatchRequest, translate

WEB = make_pod("p").label("app", "web").obj()
DB = make_pod("p").label("app", "db").obj()
KEY = "/registry/pods/default/p"


def _is_web(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("labels", {}).get("app") == "web")


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param(RawEvent(5, KEY, "PUT", WEB, None, True), "ADDED", id="create"),
    pytest.param(RawEvent(6, KEY, "PUT", WEB, WEB, False), "MODIFIED", id="update"),
    pytest.param(RawEvent(7, KEY, "DELETE", None, WEB, False), "DELETED", id="delete"),
    pytest.param(RawEvent(8, KEY, "PUT", DB, WEB, False), "DELETED", id="leaves-selector"),
    pytest.param(RawEvent(9, KEY, "PUT", WEB, DB, False), "ADDED", id="enters-selector"),
    pytest.param(RawEvent(10, KEY, "PUT", DB, DB, False), None, id="never-matches"),
    pytest.param(RawEvent(11, "/registry/nodes/n1", "PUT", WEB, None, True), None,
                 id="other-resource"),
    pytest.param(RawEvent(12, "/registry/pods/other/p", "PUT", WEB, None, True), None,
                 id="other-namespace"),
])
def test_as5_translate_applies_selector_transitions(raw: RawEvent,
                                                    expected: str | None) -> None:
    ev = translate(raw, WatchRequest(lookup("pods"), "default", _is_web))
    assert (ev.type if ev else None) == expected
    if ev is not None:
        assert ev.revision == raw.revision


def test_as5_leaving_the_selector_sends_deleted_with_the_previous_object() -> None:
    """Kubernetes' cacher: DELETED carries the object as it was when it last matched, with
    the resourceVersion of the change that made it stop matching."""
    web = {**WEB, "metadata": {**WEB["metadata"], "resourceVersion": "7"}}
    db = {**DB, "metadata": {**DB["metadata"], "resourceVersion": "8"}}
    ev = translate(RawEvent(8, KEY, "PUT", db, web, False),
                   WatchRequest(lookup("pods"), "default", _is_web))
    assert ev is not None and ev.type == "DELETED"
    assert ev.object["metadata"]["labels"] == {"app": "web"}
    assert ev.object["metadata"]["resourceVersion"] == "8"
    assert web["metadata"]["resourceVersion"] == "7", "the stored previous state is not changed"


def test_as5_deleted_event_carries_the_deletion_revision() -> None:
    ev = translate(RawEvent(42, KEY, "DELETE", None, {**WEB, "metadata": {
        **WEB["metadata"], "resourceVersion": "40"}}, False),
        WatchRequest(lookup("pods"), None, lambda o: True))
    assert ev is not None and ev.object["metadata"]["resourceVersion"] == "42"


@pytest.mark.parametrize("raw", [
    RawEvent(5, KEY, "PUT", WEB, None, True),
    RawEvent(6, KEY, "PUT", DB, WEB, False),
    RawEvent(7, KEY, "PUT", WEB, None, False),  # previous value compacted away
    RawEvent(8, KEY, "DELETE", None, WEB, False),
    RawEvent(9, "/registry/nodes/n1", "PUT", WEB, None, True),
], ids=["create", "update", "update-without-prev", "delete", "other-resource"])
def test_as5_a_watch_without_selector_sees_what_a_matching_selector_sees(
        raw: RawEvent) -> None:
    """The no-selector shortcut (the previous value is not decoded) changes nothing."""
    fast = translate(raw, WatchRequest(lookup("pods"), "default", lambda _: True,
                                       selects_all=True))
    slow = translate(raw, WatchRequest(lookup("pods"), "default", lambda _: True))
    assert fast == slow  # type, object and revision (WatchEvent's equality)


def test_as5_a_watch_without_selector_does_not_decode_the_previous_value() -> None:
    from skiff.apiserver.storage.values import encode_value

    raw = RawEvent(6, KEY, "PUT", None, None, False, value=encode_value(WEB),
                   prev_value=b"\xc1 not msgpack")  # decoding it would fail
    ev = translate(raw, WatchRequest(lookup("pods"), "default", lambda _: True,
                                     selects_all=True))
    assert ev is not None and ev.type == "MODIFIED"
