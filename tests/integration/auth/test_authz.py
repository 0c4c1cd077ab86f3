"""SPEC AU2-AU4 against a real apiserver and etcd over TLS: RBAC, the Node authorizer,
NodeRestriction, who may post a Fence, and etcd's client-certificate check."""

from __future__ import annotations

import copy
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.auth.conftest import SecureCluster

RBAC = "rbac.authorization.k8s.io/v1"


def _pod(name: str, namespace: str, node: str = "") -> dict[str, object]:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "busybox",
                                               "command": ["sleep", "60"]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def _namespace(admin: ApiClient) -> str:
    name = f"au-{uuid.uuid4().hex[:8]}"
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def _forbidden(call: Awaitable[object]) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    assert err.value.reason == Reason.FORBIDDEN, err.value.message
    return err.value


@pytest.fixture
async def alice(secure_cluster: SecureCluster) -> AsyncIterator[ApiClient]:
    async with secure_cluster.client(secure_cluster.user("alice")) as client:
        yield client


@pytest.fixture
async def node1(secure_cluster: SecureCluster) -> AsyncIterator[ApiClient]:
    async with secure_cluster.client(secure_cluster.pki.node("node-1")) as client:
        yield client


async def _grant_pod_creator(admin: ApiClient, namespace: str, subject: Obj) -> None:
    await admin.create({"apiVersion": RBAC, "kind": "Role",
                        "metadata": {"name": "pod-creator", "namespace": namespace},
                        "rules": [{"apiGroups": [""], "resources": ["pods"],
                                   "verbs": ["create", "get", "list"]}]})
    await admin.create({"apiVersion": RBAC, "kind": "RoleBinding",
                        "metadata": {"name": "pod-creators", "namespace": namespace},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                    "name": "pod-creator"},
                        "subjects": [subject]})


async def test_AU3_namespaced_role_allows_pods_there_and_403_elsewhere(
        admin: ApiClient, alice: ApiClient) -> None:
    mine, other = await _namespace(admin), await _namespace(admin)
    denied = await _forbidden(alice.create(_pod("before", mine)))
    assert denied.message == (f'pods is forbidden: User "alice" cannot create resource "pods" '
                              f'in API group "" in the namespace "{mine}"')
    await _grant_pod_creator(admin, mine, {"kind": "User", "name": "alice"})
    created = await _eventually_allowed(lambda: alice.create(_pod("p", mine)))
    assert created["metadata"]["namespace"] == mine
    denied = await _forbidden(alice.create(_pod("p", other)))
    assert denied.message == (f'pods is forbidden: User "alice" cannot create resource "pods" '
                              f'in API group "" in the namespace "{other}"')
    await _forbidden(alice.delete("pods", "p", mine))  # the Role has no delete
    with pytest.raises(ApiError) as err:
        await admin.get("pods", "p", other)
    assert err.value.reason == Reason.NOT_FOUND


async def _eventually_allowed(make: Callable[[], Awaitable[Obj]], attempts: int = 40) -> Obj:
    """RBAC changes reach the authorizer within its refresh interval (1s), as Kubernetes'
    informers do: retry a Forbidden a bounded number of times."""
    import asyncio

    for _ in range(attempts):
        try:
            return await make()
        except ApiError as err:
            if err.reason != Reason.FORBIDDEN:
                raise
            await asyncio.sleep(0.25)
    return await make()


async def test_AU3_bearer_token_user_with_group_binding_over_https(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """bob (token file, group `developers`) is bound through his group; kubectl's path."""
    ns = await _namespace(admin)
    await _grant_pod_creator(admin, ns, {"kind": "Group", "name": "developers"})
    context = ssl.create_default_context(cafile=str(secure_cluster.pki.ca))

    def post(namespace: str) -> int:
        request = urllib.request.Request(
            f"{secure_cluster.https}/api/v1/namespaces/{namespace}/pods", method="POST",
            data=json.dumps(_pod("bobs", namespace)).encode(),
            headers={"Content-Type": "application/json",
                     "Authorization": "Bearer token-bob"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            with err:
                body = json.loads(err.read())
            assert body["reason"] == "Forbidden", body
            assert body["message"].startswith('pods is forbidden: User "bob" cannot create')
            return int(err.code)

    import asyncio
    for _ in range(40):
        if await asyncio.to_thread(post, ns) == 201:
            break
        await asyncio.sleep(0.25)
    else:
        pytest.fail("bob was never allowed to create pods in his namespace")
    assert await asyncio.to_thread(post, "default") == 403


async def _nodes_and_pods(admin: ApiClient) -> str:
    for node in ("node-1", "node-2"):
        try:
            await admin.create({"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": node}})
        except ApiError as err:
            assert err.reason == Reason.ALREADY_EXISTS
        try:
            await admin.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": node, "namespace": "kube-node-lease"},
                                "spec": {"holderIdentity": node}})
        except ApiError as err:
            assert err.reason == Reason.ALREADY_EXISTS
    ns = await _namespace(admin)
    await admin.create(_pod("on-1", ns, "node-1"))
    await admin.create(_pod("on-2", ns, "node-2"))
    return ns


async def test_AU3_node_authorizer_kubelet_writes_only_its_own(
        admin: ApiClient, node1: ApiClient) -> None:
    ns = await _nodes_and_pods(admin)
    # Another node, its Lease, a pod bound to it: 403.
    other = await node1.get("nodes", "node-2")
    other["metadata"].setdefault("labels", {})["x"] = "y"
    err = await _forbidden(node1.update(other))
    assert 'User "system:node:node-1" cannot update resource "nodes"' in err.message
    lease = await node1.get("leases", "node-2", "kube-node-lease")
    lease["spec"]["holderIdentity"] = "node-1"
    await _forbidden(node1.update(lease))
    pod2 = await node1.get("pods", "on-2", ns)
    pod2["status"] = {"phase": "Failed"}
    await _forbidden(node1.update_status(pod2))
    await _forbidden(node1.delete("pods", "on-2", ns))
    await _forbidden(node1.create(_pod("mine", ns, "node-1")))
    # Its own: allowed.
    own = await node1.get("nodes", "node-1")
    own["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    await node1.update_status(own)
    own_lease = await node1.get("leases", "node-1", "kube-node-lease")
    own_lease["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
    await node1.update(own_lease)
    pod1 = await node1.get("pods", "on-1", ns)
    pod1["status"] = {"phase": "Running"}
    assert (await node1.update_status(pod1))["status"]["phase"] == "Running"
    assert (await admin.get("pods", "on-2", ns)).get("status", {}).get("phase") != "Failed"


async def test_AU3_node_restriction_kubelet_cannot_taint_itself_noexecute(
        admin: ApiClient, node1: ApiClient) -> None:
    await _nodes_and_pods(admin)
    node = await node1.get("nodes", "node-1")
    tainted = copy.deepcopy(node)
    tainted.setdefault("spec", {})["taints"] = [
        {"key": "evict-everyone", "effect": "NoExecute"}]
    err = await _forbidden(node1.update(tainted))
    assert "is not allowed to modify taints" in err.message
    restricted = copy.deepcopy(node)
    restricted["metadata"].setdefault("labels", {})[
        "node-restriction.kubernetes.io/trusted"] = "true"
    await _forbidden(node1.update(restricted))
    assert not (await admin.get("nodes", "node-1")).get("spec", {}).get("taints")


def _fence(node: str) -> dict[str, object]:
    return {"apiVersion": "skiff.io/v1", "kind": "Fence", "metadata": {"name": node},
            "spec": {"nodeName": node, "agent": "power", "reason": "test"}}


async def test_AU3_fence_from_non_admin_is_403(secure_cluster: SecureCluster,
                                               alice: ApiClient, node1: ApiClient) -> None:
    node = f"fenced-{uuid.uuid4().hex[:6]}"
    for user in (alice, node1):
        err = await _forbidden(user.create(_fence(node)))
        assert 'cannot create resource "fences" in API group "skiff.io"' in err.message
    async with secure_cluster.client(secure_cluster.pki.scheduler) as scheduler:
        await _forbidden(scheduler.create(_fence(node)))
    async with secure_cluster.client(secure_cluster.pki.controller_manager) as cm:
        created = await cm.create(_fence(node))
    assert created["metadata"]["name"] == node


async def test_AU4_etcd_refuses_a_client_without_a_certificate(
        secure_cluster: SecureCluster) -> None:
    """Only the apiservers hold an etcd client certificate (from etcd's own CA): no
    certificate, or a component's from the cluster CA, and etcd refuses the handshake."""
    url = f"https://127.0.0.1:{secure_cluster.etcd_port}/v3/kv/range"
    body = json.dumps({"key": "L3JlZ2lzdHJ5"}).encode()
    pki = secure_cluster.pki

    def ask(cert: tuple[str, str] | None) -> int:
        context = ssl.create_default_context(cafile=str(pki.etcd_ca))
        if cert:
            context.load_cert_chain(*cert)
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"),
                                    context=context, timeout=10) as resp:
            return int(resp.status)

    import asyncio
    for cert in (None, (str(pki.admin.cert), str(pki.admin.key))):
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            await asyncio.to_thread(ask, cert)
    apiserver_cert = (str(pki.apiserver_etcd_client.cert), str(pki.apiserver_etcd_client.key))
    assert await asyncio.to_thread(ask, apiserver_cert) == 200


async def test_AU3_metrics_need_get_on_the_non_resource_url(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """`GET /metrics` is RBAC's non-resource URL /metrics: 403 for bob until his group is
    bound to system:monitoring (as in Kubernetes), then kube-apiserver's series, counting
    his own requests by verb, resource and code."""
    import asyncio
    context = ssl.create_default_context(cafile=str(secure_cluster.pki.ca))

    def get(path: str) -> tuple[int, str]:
        request = urllib.request.Request(f"{secure_cluster.https}{path}",
                                         headers={"Authorization": "Bearer token-bob"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as err:
            with err:
                return int(err.code), err.read().decode()

    code, body = await asyncio.to_thread(get, "/metrics")
    assert code == 403 and json.loads(body)["message"] == (
        'forbidden: User "bob" cannot get path "/metrics"')
    await asyncio.to_thread(get, "/api/v1/namespaces/default/pods")  # a LIST, forbidden
    await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRoleBinding",
                        "metadata": {"name": f"monitoring-{uuid.uuid4().hex[:6]}"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                    "kind": "ClusterRole", "name": "system:monitoring"},
                        "subjects": [{"kind": "Group", "name": "developers"}]})
    for _ in range(40):
        code, body = await asyncio.to_thread(get, "/metrics")
        if code == 200:
            break
        await asyncio.sleep(0.25)
    assert code == 200, body
    families = {f.name: f for f in text_string_to_metric_families(body)}
    assert any(s.labels == {"code": "403", "component": "apiserver", "dry_run": "",
                            "group": "", "resource": "pods", "scope": "namespace",
                            "subresource": "", "verb": "LIST", "version": "v1"}
               and s.value >= 1 for s in families["apiserver_request"].samples), body
    assert families["apiserver_request_duration_seconds"].type == "histogram"
    assert "process_cpu_seconds" in families
    assert (await asyncio.to_thread(get, "/livez"))[0] == 200  # system:monitoring's too


async def test_AU4_lists_past_grpcs_4_mib_default_over_tls_etcd(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """Defect: with etcd behind TLS (as `skiff up` runs it) the apiserver's etcd client kept
    gRPC's 4 MiB message limit, so listing a few large ConfigMaps failed with an internal
    error and their namespace could not be deleted."""
    ns = await _namespace(admin)
    blob = "x" * 900_000
    for i in range(6):  # ~5.4 MiB in one range read
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": f"big-{i}", "namespace": ns},
                            "data": {"blob": blob}})
    listed = await admin.list("configmaps", namespace=ns)
    assert sorted(c["metadata"]["name"] for c in listed["items"]) == [
        f"big-{i}" for i in range(6)]
    assert all(len(c["data"]["blob"]) == 900_000 for c in listed["items"])
