"""CT1 `record: true` and `staleView.fromWrite` (issue 35 part 2) on the real secure
apiserver, with the official Python client as the recorded identity: its rv=0 list, its
watch with the events delivered, its create and its PATCH (as the store's update) are
exactly what the Perturbation's record shows — read kubectl-style over HTTP (`GET
.../perturbations/NAME/record`) and through `skiff.cluster.chaos.perturb.record` over
gRPC, the same — while another identity's requests are absent and a user without
`perturbations/record` is refused. With `fromWrite: 1`, the identity's first create
vanishes from its own rv=0 list (its consistent list shows it) until the Perturbation is
deleted."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from kubernetes import client, watch

from skiff.cluster.chaos import perturb
from tests.integration.auth.conftest import SecureCluster
from tests.integration.officialclient import meta, name_of, present

pytestmark = pytest.mark.integration


def _api(cluster: SecureCluster, user: str, *groups: str) -> client.ApiClient:
    pair = cluster.user(user, *groups)
    cfg = client.Configuration()
    cfg.host = cluster.https
    cfg.ssl_ca_cert = str(cluster.pki.ca)
    cfg.cert_file, cfg.key_file = str(pair.cert), str(pair.key)
    return client.ApiClient(cfg)


def _until(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture
def setup(secure_cluster: SecureCluster) -> Iterator[dict[str, Any]]:
    suffix = uuid.uuid4().hex[:6]
    target = f"rec-{suffix}"
    stack = contextlib.ExitStack()
    apis = {who: stack.enter_context(_api(secure_cluster, name, *groups)) for who, name, groups
            in (("admin", f"admin-{suffix}", ("system:masters",)),
                ("target", target, ("system:masters",)),
                ("other", f"other-{suffix}", ("system:masters",)),
                ("nobody", f"nobody-{suffix}", ()))}
    core = {who: client.CoreV1Api(api) for who, api in apis.items()}
    namespace = f"ct1-rec-{suffix}"
    core["admin"].create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name=namespace)))
    custom = client.CustomObjectsApi(apis["admin"])
    yield {"apis": apis, "core": core, "ns": namespace, "user": target, "custom": custom,
           "cluster": secure_cluster}
    for item in cast(dict[str, Any], custom.list_cluster_custom_object(
            "skiff.io", "v1", "perturbations"))["items"]:
        if item["spec"]["subject"].get("user") == target:
            custom.delete_cluster_custom_object("skiff.io", "v1", "perturbations",
                                                item["metadata"]["name"])
    core["admin"].delete_namespace(namespace)
    stack.close()


def _perturb(s: dict[str, Any], **spec: Any) -> str:
    name = f"rec-{s['ns']}"
    s["custom"].create_cluster_custom_object("skiff.io", "v1", "perturbations", {
        "apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
        "spec": {"subject": {"user": s["user"]}, **spec}})
    return name


def _get_raw(s: dict[str, Any], name: str, since: int, who: str) -> tuple[int, Any]:
    """kubectl get --raw /apis/skiff.io/v1/perturbations/NAME/record?sinceSeq=N"""
    resp = s["apis"][who].call_api(
        "GET", f"{s['cluster'].https}/apis/skiff.io/v1/perturbations/{name}/record"
               f"?sinceSeq={since}")
    return resp.status, json.loads(resp.read())


def _raw_record(s: dict[str, Any], name: str, since: int = 0) -> dict[str, Any]:
    status, body = _get_raw(s, name, since, "admin")
    assert status == 200, body
    return cast(dict[str, Any], body)


def _cm(s: dict[str, Any], who: str, name: str) -> str:
    made = s["core"][who].create_namespaced_config_map(s["ns"], client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data={"v": "0"}))
    return str(meta(made).resource_version)


def _cached_names(s: dict[str, Any], *, consistent: bool = False) -> list[str]:
    listed = s["core"]["target"].list_namespaced_config_map(
        s["ns"], **({} if consistent else {"resource_version": "0"}))
    return [name_of(i) for i in listed.items]


def _shape(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in entries:
        if e["op"] == "read":
            out.append(("read", e["verb"], e["resource"], e["namespace"],
                        e["resourceVersion"], e["stale"]))
        elif e["op"] == "watch":
            out.append(("watch", e["resource"], e["namespace"], e["resourceVersion"]))
        elif e["op"] == "event":
            out.append(("event", e["type"], e["name"], e["revision"], e["fate"]))
        else:
            out.append((e["op"], e.get("verb"), e.get("resource"), e.get("name"),
                        e.get("revision")))
    return out


async def test_ct1_record_shows_exactly_one_identitys_reads_events_and_writes(
        setup: dict[str, Any]) -> None:
    s = setup
    name = _perturb(s, record=True)
    _cm(s, "other", "theirs")
    # the apiserver follows the Perturbation: its probe lists are journaled from then on
    _until(lambda: bool(_cached_names(s)) and bool(_raw_record(s, name)["entries"]),
           "the record never started")
    start = int(_raw_record(s, name)["entries"][-1]["seq"])
    listed = s["core"]["target"].list_namespaced_config_map(s["ns"], resource_version="0")
    rv = str(present(listed.metadata).resource_version)
    events: list[tuple[str, str]] = []
    w = watch.Watch()

    def run() -> None:
        with contextlib.suppress(Exception):  # the stream cut when stopped
            for ev in w.stream(s["core"]["target"].list_namespaced_config_map, s["ns"],
                               resource_version=rv, timeout_seconds=15,
                               _request_timeout=20):
                events.append((ev["type"], name_of(ev["object"])))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        _until(lambda: any(e["op"] == "watch" for e in _raw_record(s, name, start)["entries"]),
               "the watch was never recorded")
        made = int(_cm(s, "target", "mine"))
        _until(lambda: ("ADDED", "mine") in events, f"events: {events}")
        patched = int(str(meta(s["core"]["target"].patch_namespaced_config_map(
            "mine", s["ns"], {"data": {"v": "1"}})).resource_version))
        _until(lambda: ("MODIFIED", "mine") in events, f"events: {events}")
        s["core"]["other"].list_namespaced_config_map(s["ns"], resource_version="0")
        _cm(s, "other", "theirs-2")
        _until(lambda: ("ADDED", "theirs-2") in events, f"events: {events}")
    finally:
        w.stop()
    record = _raw_record(s, name, start)
    assert (record["kind"], record["metadata"], record["dropped"]) == (
        "PerturbationRecord", {"name": name}, 0)
    assert record["apiserver"]
    entries = record["entries"]
    shape = _shape(entries)
    assert shape[:2] == [("read", "list", "configmaps", s["ns"], "0", False),
                         ("watch", "configmaps", s["ns"], rv)]
    # journaled as this apiserver saw them: a write's own event may come before the
    # write's entry (the watch cache can deliver it before the create returns)
    theirs = next(e["revision"] for e in entries if e.get("name") == "theirs-2")
    # a PATCH is the store's update; the patch's own read of the object is not journaled
    assert sorted(shape[2:], key=str) == sorted([
        ("write", "create", "configmaps", "mine", made),
        ("event", "ADDED", "mine", made, "delivered"),
        ("write", "update", "configmaps", "mine", patched),
        ("event", "MODIFIED", "mine", patched, "delivered"),
        ("event", "ADDED", "theirs-2", theirs, "delivered")], key=str)
    assert shape[-1][2] == "theirs-2"
    assert len(entries) == 7  # nothing of the other identity's list or creates
    assert [i["name"] for i in entries[0]["items"]] == ["theirs"]
    assert entries[0]["servedRevision"] == int(rv)
    assert [e["seq"] for e in entries] == list(range(start + 1, start + 8))
    pair = s["cluster"].user(f"admin-{s['ns']}", "system:masters")
    async with s["cluster"].client(pair) as skiff:
        over_grpc = await perturb.record(skiff, name, since_seq=start)
    assert over_grpc["entries"][:7] == entries
    status, refused = _get_raw(s, name, 0, "nobody")
    assert status == 403
    assert 'resource "perturbations/record" in API group "skiff.io"' in refused["message"]


def test_ct1_from_write_hides_the_identitys_first_create_from_its_cached_list(
        setup: dict[str, Any]) -> None:
    s = setup
    _cm(s, "admin", "before")
    name = _perturb(s, staleView={"fromWrite": 1}, record=True)
    # applied once the record journals the identity's (probe) reads; reads do not count
    _until(lambda: _cached_names(s) == ["before"] and bool(_raw_record(s, name)["entries"]),
           "the Perturbation was never applied")
    rev = int(_cm(s, "target", "mine"))
    cached = s["core"]["target"].list_namespaced_config_map(s["ns"], resource_version="0")
    assert [name_of(i) for i in cached.items] == ["before"]
    assert int(present(cached.metadata).resource_version) == rev - 1
    assert _cached_names(s, consistent=True) == ["before", "mine"]
    _until(lambda: cast(dict[str, Any], s["custom"].get_cluster_custom_object(
        "skiff.io", "v1", "perturbations", name)).get("status", {}).get(
        "pinnedRevision") == rev - 1, "status.pinnedRevision never written")
    s["custom"].delete_cluster_custom_object("skiff.io", "v1", "perturbations", name)
    _until(lambda: _cached_names(s) == ["before", "mine"], "never healed")
