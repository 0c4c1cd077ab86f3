"""Targeted perturbations of one client identity's view (issue 35, part 1), on the real
secure apiserver with the official Python client: a stale view (pinned, or lagging by
revisions) answers that identity's cached lists (resourceVersion=0) and holds its watch,
while its consistent reads stay fresh; missed events skip (or coalesce) one ConfigMap's
MODIFIED events for that identity's watch. Another identity sees everything at once. The
gRPC front (Skiff's own client) holds that identity's watch the same way."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from kubernetes import client, watch

from tests.integration.auth.conftest import SecureCluster
from tests.integration.officialclient import meta, name_of, present

pytestmark = pytest.mark.integration


def _api(cluster: SecureCluster, user: str) -> client.ApiClient:
    pair = cluster.user(user, "system:masters")
    cfg = client.Configuration()
    cfg.host = cluster.https
    cfg.ssl_ca_cert = str(cluster.pki.ca)
    cfg.cert_file, cfg.key_file = str(pair.cert), str(pair.key)
    return client.ApiClient(cfg)


class _Watcher:
    """An official-client watch of one namespace's ConfigMaps, read in a thread."""

    def __init__(self, core: client.CoreV1Api, namespace: str, rv: str) -> None:
        self.events: list[tuple[str, str, dict[str, str]]] = []
        self.error: Exception | None = None  # how the stream ended, if not cleanly
        self.done = False
        self._w = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(core, namespace, rv),
                                        daemon=True)
        self._thread.start()

    def _run(self, core: client.CoreV1Api, namespace: str, rv: str) -> None:
        try:
            for ev in self._w.stream(core.list_namespaced_config_map, namespace,
                                     resource_version=rv, timeout_seconds=15,
                                     _request_timeout=20):
                obj = ev["object"]
                self.events.append((ev["type"], name_of(obj), dict(obj.data or {})))
        except Exception as err:  # noqa: BLE001 (also the stream cut when the cluster stops)
            self.error = err
        self.done = True

    def names(self) -> list[str]:
        return [name for _, name, _ in self.events]

    def wait(self, until: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"events so far: {self.events}"
            time.sleep(0.05)

    def stop(self) -> None:
        self._w.stop()


@pytest.fixture
def setup(secure_cluster: SecureCluster) -> Iterator[dict[str, Any]]:
    suffix = uuid.uuid4().hex[:6]
    target, other = f"op-{suffix}", f"bystander-{suffix}"
    stack = contextlib.ExitStack()
    apis = {who: stack.enter_context(_api(secure_cluster, name)) for who, name in
            (("admin", "admin-" + suffix), ("target", target), ("other", other))}
    core = {who: client.CoreV1Api(api) for who, api in apis.items()}
    namespace = f"ct1-{suffix}"
    core["admin"].create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name=namespace)))
    custom = client.CustomObjectsApi(apis["admin"])
    yield {"core": core, "ns": namespace, "user": target, "custom": custom}
    listed = cast(dict[str, Any], custom.list_cluster_custom_object("skiff.io", "v1",
                                                                    "perturbations"))
    for item in listed["items"]:
        if item["spec"]["subject"].get("user") == target:
            custom.delete_cluster_custom_object("skiff.io", "v1", "perturbations",
                                                item["metadata"]["name"])
    core["admin"].delete_namespace(namespace)
    stack.close()


def _perturb(s: dict[str, Any], name: str, **spec: Any) -> str:
    full = f"{name}-{s['ns']}"
    s["custom"].create_cluster_custom_object("skiff.io", "v1", "perturbations", {
        "apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": full},
        "spec": {"subject": {"user": s["user"]}, **spec}})
    return full


def _unperturb(s: dict[str, Any], name: str) -> None:
    s["custom"].delete_cluster_custom_object("skiff.io", "v1", "perturbations", name)


def _cm(s: dict[str, Any], name: str, **data: str) -> str:
    made = s["core"]["admin"].create_namespaced_config_map(s["ns"], client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data=data or {"v": "0"}))
    return str(meta(made).resource_version)


def _set(s: dict[str, Any], name: str, value: str) -> None:
    s["core"]["admin"].patch_namespaced_config_map(name, s["ns"], {"data": {"v": value}})


def _cached(s: dict[str, Any], who: str = "target") -> client.V1ConfigMapList:
    listed: client.V1ConfigMapList = s["core"][who].list_namespaced_config_map(
        s["ns"], resource_version="0")
    return listed


def _rv(listed: client.V1ConfigMapList) -> int:
    return int(present(present(listed.metadata).resource_version))


def _applied(until: Callable[[], bool]) -> None:
    """Wait for the apiserver's table to have followed a Perturbation's write."""
    deadline = time.monotonic() + 5
    while not until():
        assert time.monotonic() < deadline, "the Perturbation was never applied"
        time.sleep(0.05)


def test_ct1_stale_view_pins_lists_and_watches_for_one_identity(
        setup: dict[str, Any]) -> None:
    s = setup
    pinned = _cm(s, "before")
    pert = _perturb(s, "pinned", staleView={"revision": int(pinned)})
    _applied(lambda: _rv(_cached(s)) == int(pinned))
    _cm(s, "after-1")
    _cm(s, "after-2")
    stale = _cached(s)
    assert (_rv(stale), [name_of(i) for i in stale.items]) == (int(pinned), ["before"])
    fresh = s["core"]["target"].list_namespaced_config_map(s["ns"])
    assert [name_of(i) for i in fresh.items] == ["after-1", "after-2", "before"]
    assert [name_of(i) for i in _cached(s, "other").items] == ["after-1", "after-2", "before"]
    held = _Watcher(s["core"]["target"], s["ns"], pinned)
    seen = _Watcher(s["core"]["other"], s["ns"], pinned)
    try:
        seen.wait(lambda: seen.names() == ["after-1", "after-2"])
        time.sleep(1.0)
        assert held.events == []  # past the pinned view: held
        _unperturb(s, pert)  # heals: the held events flow, in order
        held.wait(lambda: len(held.events) >= 2)
        assert [(t, n) for t, n, _ in held.events] == [("ADDED", "after-1"),
                                                       ("ADDED", "after-2")]
    finally:
        held.stop()
        seen.stop()


def test_ct1_stale_view_lags_by_revisions_for_one_identity(setup: dict[str, Any]) -> None:
    s = setup
    _perturb(s, "lag", staleView={"lagRevisions": 3})
    start = _cm(s, "x0")
    _applied(lambda: _rv(_cached(s)) < _rv(
        s["core"]["admin"].list_namespaced_config_map(s["ns"])))
    held = _Watcher(s["core"]["target"], s["ns"], start)
    seen = _Watcher(s["core"]["other"], s["ns"], start)
    try:
        at = {f"x{i}": int(_cm(s, f"x{i}")) for i in (1, 2, 3)}
        seen.wait(lambda: seen.names() == ["x1", "x2", "x3"])
        stale = _cached(s)
        time.sleep(0.5)
        shown = held.names()
        # etcd's revision now, at or past the head of every view the target was given. Any
        # write of the cluster moves it (the apiserver's own endpoint lease, now and then):
        # with none since x3, x1 (two revisions before it) is not yet in view, and nothing is.
        head = _rv(s["core"]["admin"].list_namespaced_config_map(s["ns"]))
        assert _rv(stale) <= head - 3
        assert [n for n in (name_of(i) for i in stale.items) if at.get(n, 0) > head - 3] == []
        assert [n for n in shown if at[n] > head - 3] == []
        _cm(s, "x4")
        held.wait(lambda: held.names()[:1] == ["x1"])
        assert "x2" not in held.names() or held.names().index("x2") == 1
    finally:
        held.stop()
        seen.stop()


def test_ct1_missed_events_skips_modified_for_one_identity(setup: dict[str, Any]) -> None:
    s = setup
    start = _cm(s, "web-0")
    _cm(s, "web-1")
    _perturb(s, "missed", missedEvents={"types": ["MODIFIED"], "names": ["web-0"]})
    time.sleep(0.5)  # the table follows the write
    held = _Watcher(s["core"]["target"], s["ns"], start)
    seen = _Watcher(s["core"]["other"], s["ns"], start)
    try:
        for value in ("1", "2", "3"):
            _set(s, "web-0", value)
        _set(s, "web-1", "1")
        seen.wait(lambda: len(seen.events) >= 5)
        assert seen.names() == ["web-1", "web-0", "web-0", "web-0", "web-1"]
        held.wait(lambda: "web-1" in held.names()[1:])
        time.sleep(0.3)
        assert [(t, n) for t, n, _ in held.events] == [("ADDED", "web-1"),
                                                       ("MODIFIED", "web-1")]
    finally:
        held.stop()
        seen.stop()


def test_ct1_missed_events_reach_a_watch_opened_before_the_perturbation(
        setup: dict[str, Any]) -> None:
    """An informer keeps its watch open for minutes: a Perturbation created meanwhile
    applies to that open watch from its next event, not only to the next watch."""
    s = setup
    start = _cm(s, "web-0")
    held = _Watcher(s["core"]["target"], s["ns"], start)
    try:
        _set(s, "web-0", "1")
        held.wait(lambda: len(held.events) >= 1)
        _perturb(s, "late", missedEvents={"types": ["MODIFIED"], "names": ["web-0"]})
        time.sleep(0.5)  # the table follows the write
        _set(s, "web-0", "2")
        _cm(s, "web-1")
        held.wait(lambda: "web-1" in held.names())
        time.sleep(0.3)
        assert [(t, n) for t, n, _ in held.events] == [("MODIFIED", "web-0"),
                                                       ("ADDED", "web-1")]
    finally:
        held.stop()


def test_ct1_healed_missed_events_end_the_watch_with_410_gone(setup: dict[str, Any]) -> None:
    """What a watch missed is not in its client's view: healed, the watch ends with an
    ERROR event carrying 410 Gone (the official client raises it), so the client lists
    again and sees the final state."""
    s = setup
    start = _cm(s, "web-0")
    name = _perturb(s, "gone", missedEvents={"types": ["MODIFIED"]})
    time.sleep(0.5)
    held = _Watcher(s["core"]["target"], s["ns"], start)
    try:
        _set(s, "web-0", "1")
        time.sleep(0.5)
        _unperturb(s, name)
        held.wait(lambda: held.done)
        assert held.events == []
        assert isinstance(held.error, client.ApiException), held.error
        assert held.error.status == 410
        assert "list again" in str(held.error.reason) + str(held.error.body)
    finally:
        held.stop()
    assert _cached(s).items[0].data == {"v": "1"}  # the list shows what the watch missed


def test_ct1_missed_events_coalesce_to_latest_state_for_one_identity(
        setup: dict[str, Any]) -> None:
    s = setup
    start = _cm(s, "web-0")
    _perturb(s, "coalesce", missedEvents={"types": ["MODIFIED"], "names": ["web-0"],
                                          "coalesceSeconds": 1})
    time.sleep(0.5)
    held = _Watcher(s["core"]["target"], s["ns"], start)
    seen = _Watcher(s["core"]["other"], s["ns"], start)
    try:
        began = time.monotonic()
        for value in ("1", "2", "3"):
            _set(s, "web-0", value)
        seen.wait(lambda: len(seen.events) >= 3)
        assert [d for _, _, d in seen.events] == [{"v": "1"}, {"v": "2"}, {"v": "3"}]
        assert held.events == []
        held.wait(lambda: bool(held.events))
        assert time.monotonic() - began >= 0.9
        time.sleep(0.3)
        assert held.events == [("MODIFIED", "web-0", {"v": "3"})]
    finally:
        held.stop()
        seen.stop()


async def test_ct1_stale_view_holds_the_grpc_watch_of_skiffs_client(
        secure_cluster: SecureCluster, setup: dict[str, Any]) -> None:
    s = setup
    pinned = _cm(s, "g0")
    pert = _perturb(s, "grpc", staleView={"revision": int(pinned)})
    _applied(lambda: _rv(_cached(s)) == int(pinned))
    pair = secure_cluster.user(s["user"], "system:masters")
    async with secure_cluster.client(pair) as skiff:
        events = skiff.watch("configmaps", s["ns"], resource_version=pinned)
        first = asyncio.ensure_future(anext(events))
        try:
            _cm(s, "g1")
            done, _ = await asyncio.wait({first}, timeout=1.0)
            assert not done  # past the pinned view: held on the gRPC front too
            _unperturb(s, pert)
            ev = await asyncio.wait_for(first, 5)
            assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "g1")
        finally:
            first.cancel()
            await events.aclose()
