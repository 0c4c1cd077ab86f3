"""AX1: server-side apply with field managers, managedFields and conflicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skiff.api import ApiError
from skiff.apiserver.endpoints.handlers.fieldmanager.apply import record_update, server_side_apply


def pod(labels: dict[str, str], image: str = "busybox") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [{"name": "main", "image": image}]}}


def managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]]


def test_AX1_apply_creates_with_managed_fields() -> None:
    created = server_side_apply("Pod", None, pod({"tier": "a"}), manager="alice", force=False)
    assert managers(created) == [("alice", "Apply")]
    fields = created["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields["f:metadata"]["f:labels"] == {"f:tier": {}}
    assert fields["f:spec"]["f:containers"]['k:{"name":"main"}'] == {".": {}, "f:image": {},
                                                                     "f:name": {}}


def test_AX1_apply_conflict_names_manager_and_field_then_force_takes_it() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a"}), manager="alice", force=False)
    with pytest.raises(ApiError) as err:
        server_side_apply("Pod", live, pod({"tier": "b"}), manager="bob", force=False)
    assert err.value.code == 409
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "alice": '
                                 ".metadata.labels.tier")
    status = err.value.to_status()
    assert status["details"]["causes"][0] == {
        "reason": "FieldManagerConflict", "message": 'conflict with "alice"',
        "field": ".metadata.labels.tier"}
    forced = server_side_apply("Pod", live, pod({"tier": "b"}), manager="bob", force=True)
    assert forced["metadata"]["labels"]["tier"] == "b"
    alice = next(e for e in forced["metadata"]["managedFields"] if e["manager"] == "alice")
    assert "f:tier" not in alice["fieldsV1"].get("f:metadata", {}).get("f:labels", {})


def test_AX1_same_value_is_shared_not_a_conflict() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a"}), manager="alice", force=False)
    shared = server_side_apply("Pod", live, pod({"tier": "a"}), manager="bob", force=False)
    assert sorted(managers(shared)) == [("alice", "Apply"), ("bob", "Apply")]


def test_AX1_apply_removes_fields_the_manager_stopped_applying() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a", "old": "x"}), manager="alice",
                             force=False)
    again = server_side_apply("Pod", live, pod({"tier": "a"}), manager="alice", force=False)
    assert again["metadata"]["labels"] == {"tier": "a"}


def test_AX1_update_conflicts_name_the_api_version() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a"}), manager="alice", force=False)
    edited = record_update("Pod", live, pod({"tier": "c"}) | {
        "metadata": {**live["metadata"], "labels": {"tier": "c"}}}, manager="kubectl-edit")
    assert ("kubectl-edit", "Update") in managers(edited)
    with pytest.raises(ApiError) as err:
        server_side_apply("Pod", edited, pod({"tier": "a"}), manager="alice", force=False)
    assert 'conflict with "kubectl-edit" using v1: .metadata.labels.tier' in err.value.message


def test_AX1_list_map_key_left_to_its_default_is_not_a_conflict() -> None:
    applied = pod({"tier": "a"})
    applied["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    live = server_side_apply("Pod", None, applied, manager="alice", force=False)
    live["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"  # the apiserver's default
    again = server_side_apply("Pod", live, applied, manager="bob", force=False)
    assert again["spec"]["containers"][0]["ports"] == [{"containerPort": 80,
                                                        "protocol": "TCP"}]


def test_AX1_reapplying_or_rewriting_the_same_object_changes_nothing() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a"}), manager="alice", force=False)
    live["metadata"]["managedFields"][0]["time"] = "2020-01-01T00:00:00Z"
    assert server_side_apply("Pod", live, pod({"tier": "a"}), manager="alice",
                             force=False) == live
    changed = pod({"tier": "b"}) | {"metadata": {**live["metadata"], "labels": {"tier": "b"}}}
    edited = record_update("Pod", live, changed, manager="kubectl-edit")
    for entry in edited["metadata"]["managedFields"]:
        entry["time"] = "2020-01-01T00:00:00Z"
    again = record_update("Pod", edited, edited, manager="kubectl-edit")
    assert again["metadata"]["managedFields"] == edited["metadata"]["managedFields"]


def test_AX1_status_writes_are_their_own_entry_and_main_writes_keep_them() -> None:
    created = record_update("Pod", None, pod({"tier": "a"}), manager="kubectl-create")
    running = {**created, "status": {"phase": "Running"}}
    reported = record_update("Pod", created, running, manager="kubelet",
                             subresource="status")
    entries = {(e["manager"], e.get("subresource", "")): e
               for e in reported["metadata"]["managedFields"]}
    assert set(entries) == {("kubectl-create", ""), ("kubelet", "status")}
    assert entries[("kubelet", "status")]["fieldsV1"] == {"f:status": {"f:phase": {}}}
    assert "f:spec" in entries[("kubectl-create", "")]["fieldsV1"]
    # a later main write by someone else keeps the kubelet's status fields (they were lost)
    relabelled = {**reported, "metadata": {**reported["metadata"], "labels": {"tier": "b"}}}
    after = record_update("Pod", reported, relabelled, manager="kube-controller-manager")
    owners = {(e["manager"], e.get("subresource", "")): e["fieldsV1"]
              for e in after["metadata"]["managedFields"]}
    assert owners[("kubelet", "status")] == {"f:status": {"f:phase": {}}}
    assert owners[("kube-controller-manager", "")] == {"f:metadata": {"f:labels": {
        "f:tier": {}}}}


def service(ports: list[dict[str, Any]], labels: dict[str, str] | None = None
            ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"ports": ports}}


def defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """What the apiserver stores: protocol and targetPort defaulted."""
    for port in obj["spec"]["ports"]:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port["port"])
    return obj


def test_port_renumbered_under_its_name_is_replaced_whole() -> None:
    live = defaulted(server_side_apply("Service", None, service([{"name": "http",
                                                                  "port": 80}]),
                                       manager="helm", force=False))
    again = server_side_apply("Service", live, service([{"name": "http", "port": 8080}]),
                              manager="helm", force=False)
    assert again["spec"]["ports"] == [{"name": "http", "port": 8080}]
    fields = again["metadata"]["managedFields"][0]["fieldsV1"]
    assert list(fields["f:spec"]["f:ports"]) == ['k:{"port":8080,"protocol":"TCP"}']


def test_an_item_another_applier_owns_stays_and_keeps_its_keys() -> None:
    live = defaulted(server_side_apply("Service", None, service([
        {"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]),
        manager="helm", force=False))
    shared = server_side_apply("Service", live, service([{"name": "http", "port": 80}]),
                               manager="argo", force=False)
    dropped = server_side_apply("Service", shared, service([]), manager="helm", force=False)
    assert dropped["spec"]["ports"] == [{"name": "http", "port": 80, "protocol": "TCP",
                                         "targetPort": 80}]


def test_entries_with_null_key_defaults_keep_their_items() -> None:
    live = defaulted(server_side_apply("Service", None, service([{"name": "http",
                                                                  "port": 80}]),
                                       manager="helm", force=False))
    # an entry as Skiff wrote it before it knew the default of `protocol`
    ports = live["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:ports"]
    ports['k:{"port":80,"protocol":null}'] = ports.pop('k:{"port":80,"protocol":"TCP"}')
    again = server_side_apply("Service", live, service([{"name": "web", "port": 80}]),
                              manager="helm", force=False)
    assert again["spec"]["ports"] == [{"name": "web", "port": 80, "protocol": "TCP",
                                       "targetPort": 80}]


@pytest.mark.parametrize(("live_ports", "applied_ports", "merged"), [
    ([1, 2, 3], [3, 2], [1, 3, 2]),
    ([1, 2, 3], [3, 1], [2, 3, 1]),
    ([2], [1, 2, 3], [1, 2, 3]),
    ([1, 2, 3], [3, 4, 1], [2, 3, 4, 1]),
])
def test_keyed_lists_merge_in_structured_merge_diffs_order(
        live_ports: list[int], applied_ports: list[int], merged: list[int]) -> None:
    live = defaulted(server_side_apply("Service", None, service(
        [{"port": p} for p in live_ports]), manager="kubectl", force=False))
    result = server_side_apply("Service", live, service([{"port": p} for p in applied_ports]),
                               manager="helm", force=False)
    assert [p["port"] for p in result["spec"]["ports"]] == merged


def test_applied_empty_map_is_owned_then_filled() -> None:
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "c", "labels": {}}, "data": {}}
    live = server_side_apply("ConfigMap", None, cm, manager="helm", force=False)
    filled = {**cm, "metadata": {"name": "c", "labels": {"app": "x"}},
              "data": {"key1": "v"}}
    again = server_side_apply("ConfigMap", live, filled, manager="helm", force=False)
    assert again["data"] == {"key1": "v"}
    assert again["metadata"]["labels"] == {"app": "x"}
    emptied = server_side_apply("ConfigMap", again, {**cm, "metadata": {"name": "c"}},
                                manager="helm", force=False)
    assert emptied["data"] == {} and "labels" not in emptied["metadata"]


def test_a_removed_item_leaves_the_other_managers_entries() -> None:
    live = server_side_apply("Pod", None, pod({"tier": "a"}) | {"spec": {"containers": [
        {"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]}},
        manager="helm", force=False)
    edited = copy.deepcopy(live)
    edited["spec"]["containers"][1]["image"] = "busybox:2"
    edited = record_update("Pod", live, edited, manager="kubectl-set")
    dropped = server_side_apply("Pod", edited, pod({"tier": "a"}), manager="helm",
                                force=False)
    assert [c["name"] for c in dropped["spec"]["containers"]] == ["main"]
    assert [e["manager"] for e in dropped["metadata"]["managedFields"]] == ["helm"]
