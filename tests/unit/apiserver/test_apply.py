"""AX1: server-side apply with field managers, managedFields and conflicts."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError
from skiff.apiserver.apply import record_update, server_side_apply


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
