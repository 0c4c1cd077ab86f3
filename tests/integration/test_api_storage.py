"""SPEC AS1, AS3, AS4, AS6, AS7, AS8 against a real etcd and apiserver process."""

from __future__ import annotations

from typing import Any

import aetcd
import grpc
import msgpack
import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from skiff.rpc import method_path
from tests.integration.cluster import Cluster
from tests.integration.objects import pdb, pod


async def test_as4_create_of_existing_name_is_already_exists(api: ApiClient,
                                                              namespace: str) -> None:
    await api.create(pod("p", namespace))
    with pytest.raises(ApiError) as err:
        await api.create(pod("p", namespace))
    assert err.value.reason == Reason.ALREADY_EXISTS
    assert 'pods "p" already exists' in err.value.message


async def test_as4_update_with_stale_resource_version_is_conflict(api: ApiClient,
                                                                   namespace: str) -> None:
    created = await api.create(pod("p", namespace, labels={"v": "1"}))
    first = dict(created, metadata={**created["metadata"], "labels": {"v": "2"}})
    updated = await api.update(first)
    assert int(updated["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])
    stale = dict(created, metadata={**created["metadata"], "labels": {"v": "3"}})
    with pytest.raises(ApiError) as err:
        await api.update(stale)
    assert err.value.reason == Reason.CONFLICT
    assert (await api.get("pods", "p", namespace))["metadata"]["labels"] == {"v": "2"}


async def test_as3_stored_in_etcd_as_msgpack_with_rv_the_mod_revision(
        api: ApiClient, namespace: str, shared_cluster: Cluster) -> None:
    created = await api.create(pod("p", namespace))
    async with aetcd.Client(port=shared_cluster.etcd_port) as etcd:
        got = await etcd.get(f"/registry/pods/{namespace}/p".encode())
    assert got is not None
    stored = msgpack.unpackb(got.value)
    assert stored["metadata"]["name"] == "p"
    assert "resourceVersion" not in stored["metadata"]
    assert created["metadata"]["resourceVersion"] == str(got.mod_revision)


async def test_as7_invalid_object_names_the_field_path_and_stores_nothing(
        api: ApiClient, namespace: str) -> None:
    bad = pod("p", namespace)
    bad["spec"]["containers"][0]["name"] = ""
    with pytest.raises(ApiError) as err:
        await api.create(bad)
    assert err.value.reason == Reason.INVALID
    assert "spec.containers[0].name: Required value" in err.value.message
    with pytest.raises(ApiError) as missing:
        await api.get("pods", "p", namespace)
    assert missing.value.reason == Reason.NOT_FOUND


@pytest.mark.parametrize("name", ["Upper", "under_score", "-lead", "a" * 254])
async def test_as7_invalid_names_are_rejected(api: ApiClient, namespace: str,
                                              name: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(pod(name, namespace))
    assert err.value.reason == Reason.INVALID
    assert "metadata.name" in err.value.message


async def test_as1_unknown_fields_are_dropped_with_a_warning(api: ApiClient,
                                                             namespace: str) -> None:
    obj = pod("p", namespace)
    obj["spec"]["containerz"] = []
    created = await api.create(obj)
    assert "containerz" not in created["spec"]
    assert any("spec.containerz" in w for w in api.last_warnings)


async def test_as1_strict_field_validation_rejects_unknown_fields(api: ApiClient,
                                                                  namespace: str) -> None:
    obj = pod("p", namespace)
    obj["spec"]["containerz"] = []
    with pytest.raises(ApiError) as err:
        await api.create(obj, field_validation="Strict")
    assert err.value.reason == Reason.BAD_REQUEST
    assert 'unknown field "spec.containerz"' in err.value.message


async def test_as1_defaults_and_metadata_are_kubernetes_shaped(api: ApiClient,
                                                               namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert created["spec"]["terminationGracePeriodSeconds"] == 30
    assert created["spec"]["restartPolicy"] == "Always"
    assert created["status"]["phase"] == "Pending"


async def test_as1_generation_moves_only_when_the_spec_changes(api: ApiClient,
                                                               namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    created["metadata"]["labels"] = {"a": "b"}
    relabeled = await api.update(created)
    assert relabeled["metadata"]["generation"] == 1
    without_defaults = dict(relabeled, spec=dict(relabeled["spec"]))
    for defaulted in ("restartPolicy", "dnsPolicy", "schedulerName",
                      "terminationGracePeriodSeconds"):
        without_defaults["spec"].pop(defaulted)
    resent = await api.update(without_defaults)
    assert resent["metadata"]["resourceVersion"] == relabeled["metadata"]["resourceVersion"]
    resent["spec"]["activeDeadlineSeconds"] = 60
    changed = await api.update(resent)
    assert changed["metadata"]["generation"] == 2


async def test_as8_spec_writers_cannot_change_status(api: ApiClient, namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    created["status"] = {"phase": "Running"}
    created["metadata"]["labels"] = {"a": "b"}
    updated = await api.update(created)
    assert updated["status"]["phase"] == "Pending"
    assert updated["metadata"]["labels"] == {"a": "b"}


async def test_as8_status_writers_cannot_change_spec(api: ApiClient, namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    created["status"] = {"phase": "Running"}
    created["spec"]["activeDeadlineSeconds"] = 5
    updated = await api.update_status(created)
    assert updated["status"]["phase"] == "Running"
    assert "activeDeadlineSeconds" not in updated["spec"]


async def test_as8_binding_sets_node_name_once(api: ApiClient, namespace: str) -> None:
    await api.create(pod("p", namespace))
    bound = await api.bind(namespace, "p", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    with pytest.raises(ApiError) as err:
        await api.bind(namespace, "p", "node-2")
    assert err.value.reason == Reason.CONFLICT
    assert "already assigned" in err.value.message


async def test_as8_binding_right_after_a_write_keeps_that_write(
        api: ApiClient, namespace: str) -> None:
    """Bind's first try uses the watch cache's copy of the pod; a label written a moment
    before (which the cache may not have seen yet) must survive the binding, and a pod
    deleted and recreated under the same name is bound only by its new uid."""
    for i in range(20):
        name = f"p{i}"
        created = await api.create(pod(name, namespace, labels={"v": "1"}))
        created["metadata"]["labels"] = {"v": "2"}
        await api.update(created)
        bound = await api.bind(namespace, name, "node-1", uid=created["metadata"]["uid"])
        assert bound["metadata"]["labels"] == {"v": "2"}
        assert (await api.get("pods", name, namespace))["metadata"]["labels"] == {"v": "2"}
    old = await api.create(pod("again", namespace))
    await api.delete("pods", "again", namespace, grace_period_seconds=0)
    new = await api.create(pod("again", namespace))
    with pytest.raises(ApiError) as err:
        await api.bind(namespace, "again", "node-1", uid=old["metadata"]["uid"])
    assert err.value.reason == Reason.CONFLICT
    bound = await api.bind(namespace, "again", "node-1", uid=new["metadata"]["uid"])
    assert bound["spec"]["nodeName"] == "node-1"


async def test_as8_eviction_is_refused_with_429_when_the_pdb_is_exhausted(
        api: ApiClient, namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1", labels={"app": "db"}))
    running = await api.get("pods", "p", namespace)
    # Ready, so it is a healthy pod the budget protects (a not-ready one may be evicted
    # under unhealthyPodEvictionPolicy IfHealthyBudget while the budget is met).
    running["status"] = {"phase": "Running",
                         "conditions": [{"type": "Ready", "status": "True"}]}
    await api.update_status(running)
    budget = await api.create(pdb("db", namespace, {"app": "db"}, min_available=1))
    budget["status"] = {"observedGeneration": 1, "currentHealthy": 1, "desiredHealthy": 1,
                        "disruptionsAllowed": 0, "expectedPods": 1}
    await api.update_status(budget)
    with pytest.raises(ApiError) as err:
        await api.evict(namespace, "p")
    assert err.value.reason == Reason.TOO_MANY_REQUESTS and err.value.code == 429
    assert "disruption budget" in err.value.message
    assert not (await api.get("pods", "p", namespace))["metadata"].get("deletionTimestamp")
    budget = await api.get("poddisruptionbudgets", "db", namespace)
    budget["status"]["disruptionsAllowed"] = 1
    await api.update_status(budget)
    result = await api.evict(namespace, "p", grace_period_seconds=30)
    evicted = result["object"]
    assert evicted["metadata"]["deletionTimestamp"]
    assert any(c["type"] == "DisruptionTarget" for c in evicted["status"]["conditions"])
    budget = await api.get("poddisruptionbudgets", "db", namespace)
    assert budget["status"]["disruptionsAllowed"] == 0


async def test_as6_history_lists_every_version_and_reads_at_a_past_revision(
        api: ApiClient, namespace: str) -> None:
    created = await api.create(pod("p", namespace, labels={"v": "1"}))
    revisions = [int(created["metadata"]["resourceVersion"])]
    current = created
    for v in ("2", "3"):
        current["metadata"]["labels"] = {"v": v}
        current = await api.update(current)
        revisions.append(int(current["metadata"]["resourceVersion"]))
    history = await api.history("pods", "p", namespace)
    assert [h["revision"] for h in history] == revisions
    assert [h["type"] for h in history] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert [h["object"]["metadata"]["labels"]["v"] for h in history] == ["1", "2", "3"]
    old = await api.get("pods", "p", namespace, revision=revisions[0])
    assert old["metadata"]["labels"] == {"v": "1"}
    listed = await api.list("pods", namespace, revision=revisions[1])
    assert [i["metadata"]["labels"]["v"] for i in listed["items"]] == ["2"]
    assert listed["metadata"]["resourceVersion"] == str(revisions[1])


async def test_list_filters_by_label_and_field_selectors(api: ApiClient,
                                                         namespace: str) -> None:
    await api.create(pod("a", namespace, labels={"app": "web"}, node="node-1"))
    await api.create(pod("b", namespace, labels={"app": "db"}, node="node-2"))
    await api.create(pod("c", namespace, labels={"app": "web"}))

    def names(result: dict[str, Any]) -> list[str]:
        return sorted(i["metadata"]["name"] for i in result["items"])

    assert names(await api.list("pods", namespace, label_selector="app=web")) == ["a", "c"]
    assert names(await api.list("pods", namespace, label_selector="app in (db)")) == ["b"]
    assert names(await api.list("pods", namespace, field_selector="spec.nodeName=node-2")) == [
        "b"]
    assert names(await api.list("pods", namespace, field_selector="metadata.name!=a")) == [
        "b", "c"]


# -- bad input ---------------------------------------------------------------------------


async def test_bad_input_garbage_bytes_get_a_clear_error_and_server_keeps_serving(
        api: ApiClient, shared_cluster: Cluster, namespace: str) -> None:
    async with grpc.aio.insecure_channel(shared_cluster.api_target) as channel:
        call = channel.unary_unary(method_path("Create"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(b"\xc1\xff garbage")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "msgpack" in (err.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as not_map:
            await call(msgpack.packb([1, 2, 3]))
        assert not_map.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await api.create(pod("after", namespace)))["metadata"]["name"] == "after"


async def test_bad_input_wrong_kind_for_resource(api: ApiClient, namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.call("Create", {"resource": "pods", "namespace": namespace,
                                  "object": {"kind": "Node", "metadata": {"name": "x"}}})
    assert err.value.reason == Reason.BAD_REQUEST
    assert "kind" in err.value.message
    with pytest.raises(ApiError) as unknown:
        await api.create({"apiVersion": "v1", "kind": "Frobnicator", "metadata": {"name": "x"}})
    assert unknown.value.reason == Reason.NOT_FOUND


async def test_bad_input_oversized_object_is_rejected_and_nothing_stored(
        api: ApiClient, namespace: str) -> None:
    big = pod("big", namespace)
    big["metadata"]["annotations"] = {f"k{i}": "x" * 60_000 for i in range(30)}
    with pytest.raises(ApiError) as err:
        await api.create(big)
    assert err.value.reason in (Reason.REQUEST_ENTITY_TOO_LARGE, Reason.INVALID)
    with pytest.raises(ApiError):
        await api.get("pods", "big", namespace)


async def test_bad_input_invalid_selector_names_the_problem(api: ApiClient,
                                                            namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.list("pods", namespace, label_selector="app in (web")
    assert err.value.reason == Reason.BAD_REQUEST
    assert "app" in err.value.message


async def test_bad_input_pod_in_missing_namespace_is_refused(api: ApiClient) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(pod("p", "does-not-exist"))
    assert err.value.reason == Reason.NOT_FOUND
    assert 'namespaces "does-not-exist" not found' in err.value.message


async def test_as1_only_kinds_kubernetes_versions_carry_a_generation(api: ApiClient,
                                                                      namespace: str) -> None:
    """A ConfigMap or Service has no metadata.generation in Kubernetes (only kinds whose
    strategy counts spec changes do), and a write's empty annotations map (kubectl's apply
    patches send `annotations: {}`) is not stored, as Go's omitempty drops it."""
    created = await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "cfg", "namespace": namespace,
                                             "generation": 7, "annotations": {}},
                                "data": {"a": "1"}})
    assert "generation" not in created["metadata"]
    assert "annotations" not in created["metadata"]
    created["data"] = {"a": "2"}
    created["metadata"]["labels"] = {}
    updated = await api.update(created)
    assert "generation" not in updated["metadata"] and "labels" not in updated["metadata"]
    rs = await api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                           "metadata": {"name": "rs", "namespace": namespace},
                           "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
                                    "template": {"metadata": {"labels": {"a": "b"}},
                                                 "spec": {"containers": [
                                                     {"name": "c", "image": "busybox"}]}}}})
    assert rs["metadata"]["generation"] == 1
