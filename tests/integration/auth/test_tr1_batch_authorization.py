"""SPEC TR1 with RBAC, the Node authorizer and NodeRestriction on: every item of a batch is
authorized and admitted as the request it would be alone, so a forbidden item fails alone
and its neighbours in the same message land."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Awaitable

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.pki import CertPair
from tests.integration.auth.conftest import SecureCluster

RBAC = "rbac.authorization.k8s.io/v1"


async def _outcome(write: Awaitable[Obj]) -> str:
    try:
        await write
    except ApiError as err:
        return f"{err.reason.value}: {err.message}"
    return "ok"


def _batching(cluster: SecureCluster, pair: CertPair) -> ApiClient:
    return ApiClient(cluster.api_target, retry_seconds=10, batch=True, batch_items=100,
                     batch_delay=0.2, credentials=cluster.credentials(pair),
                     batch_resources=frozenset({"configmaps", "leases", "nodes"}))


async def _ensure(admin: ApiClient, obj: Obj) -> Obj:
    try:
        return await admin.create(obj)
    except ApiError as err:
        assert err.reason == Reason.ALREADY_EXISTS
        meta = obj["metadata"]
        resource = "nodes" if obj["kind"] == "Node" else "leases"
        return await admin.get(resource, meta["name"], meta.get("namespace"))


async def test_tr1_batch_authorizes_each_item_as_its_own_request(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    mine, other = (f"tr1-{uuid.uuid4().hex[:8]}" for _ in range(2))
    for ns in (mine, other):
        await admin.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns}})
    await admin.create({"apiVersion": RBAC, "kind": "Role",
                        "metadata": {"name": "cm-writer", "namespace": mine},
                        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                   "verbs": ["create", "update"]}]})
    await admin.create({"apiVersion": RBAC, "kind": "RoleBinding",
                        "metadata": {"name": "cm-writers", "namespace": mine},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                    "name": "cm-writer"},
                        "subjects": [{"kind": "User", "name": "carol"}]})
    async with _batching(secure_cluster, secure_cluster.user("carol")) as carol:
        batcher = carol.batcher
        assert batcher is not None
        for _ in range(40):  # RBAC reaches the authorizer within its refresh interval
            probe = await _outcome(carol.create(
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}", "namespace": mine}}))
            if probe == "ok":
                break
            await asyncio.sleep(0.25)
        before = batcher.batches
        outcomes = await asyncio.gather(*(
            _outcome(carol.create({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": f"cm-{i}", "namespace": ns}}))
            for i, ns in enumerate((mine, other, mine, other))))
        assert batcher.batches - before == 1, "the four writes shared one call"
    assert outcomes[0] == outcomes[2] == "ok"
    assert outcomes[1] == outcomes[3] == (
        'Forbidden: configmaps is forbidden: User "carol" cannot create resource '
        f'"configmaps" in API group "" in the namespace "{other}"'), outcomes
    # carol may create but not get: resending a part of an existing ConfigMap (as a
    # client does after a failover) must not answer her with what it holds
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "private", "namespace": mine},
                        "data": {"password": "s3cret"}})
    async with _batching(secure_cluster, secure_cluster.user("carol")) as carol:
        probe = (await carol.call("Batch", {"resent": True, "items": [{
            "method": "Create", "resource": "configmaps", "namespace": mine,
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "private", "namespace": mine}}}]}))["results"]
    assert probe[0]["error"]["reason"] == "AlreadyExists", probe
    assert "s3cret" not in str(probe)
    stored = {o["metadata"]["name"] for o in
              (await admin.list("configmaps", mine))["items"]}
    assert {"cm-0", "cm-2"} <= stored
    assert not [o for o in (await admin.list("configmaps", other))["items"]
                if o["metadata"]["name"].startswith("cm-")]


async def test_tr1_batch_admits_each_kubelet_write_as_its_own_request(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    ns = f"tr1-{uuid.uuid4().hex[:8]}"
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    leases = {}
    for node in ("node-1", "node-2"):
        await _ensure(admin, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        leases[node] = await _ensure(admin, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node}})
        await admin.create({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": f"on-{node}", "namespace": ns},
                            "spec": {"nodeName": node, "containers": [
                                {"name": "c", "image": "busybox"}]}})
    async with _batching(secure_cluster, secure_cluster.pki.node("node-1")) as node1:
        own_pod = await node1.get("pods", "on-node-1", ns)
        other_pod = await node1.get("pods", "on-node-2", ns)
        own_node = await node1.get("nodes", "node-1")
        tainted = copy.deepcopy(own_node)
        tainted.setdefault("spec", {})["taints"] = [{"key": "evict", "effect": "NoExecute"}]
        own_lease = await node1.get("leases", "node-1", "kube-node-lease")
        other_lease = await node1.get("leases", "node-2", "kube-node-lease")
        for obj in (own_lease, other_lease):
            obj["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
        own_pod["status"] = {"phase": "Running"}
        other_pod["status"] = {"phase": "Failed"}
        batcher = node1.batcher
        assert batcher is not None
        before = batcher.batches
        outcomes = await asyncio.gather(
            _outcome(node1.update_status(own_pod)),
            _outcome(node1.update_status(other_pod)),  # the Node authorizer: 403
            _outcome(node1.update(tainted)),  # NodeRestriction admission: 403
            _outcome(node1.update(own_lease)),
            _outcome(node1.update(other_lease)))
        assert batcher.batches - before == 1, "the five writes shared one call"
    assert outcomes[0] == "ok" and outcomes[3] == "ok", outcomes
    assert outcomes[1].startswith("Forbidden: ") and 'User "system:node:node-1"' in outcomes[1]
    assert outcomes[2].startswith("Forbidden: ") and "taints" in outcomes[2]
    assert outcomes[4].startswith("Forbidden: ")
    assert (await admin.get("pods", "on-node-1", ns))["status"]["phase"] == "Running"
    assert (await admin.get("pods", "on-node-2", ns)).get("status", {}).get(
        "phase") != "Failed"
    assert not (await admin.get("nodes", "node-1")).get("spec", {}).get("taints")
