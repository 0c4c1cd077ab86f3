"""SPEC AU5 against a real apiserver and etcd over TLS:
authorization covers exactly the scope a request reads or writes, on both fronts.

- A namespaced user's gRPC List / Watch / PodMetrics without a namespace (missing, "" or a
  non-string such as 0) reads every namespace, so it is authorized cluster-wide (403), or
  refused as malformed (400) — never authorized against `default` and answered with all.
- A write names one object: PUT (and PATCH) `.../configmaps/allowed` whose body names
  `victim` is Kubernetes' 400 and `victim` is untouched, over HTTPS and over gRPC.
- An object's history and reads at a past revision show what a list at those revisions
  would: a user with only `get` on a Secret cannot read its old values (403).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.pki import CertPair
from tests.integration.auth.conftest import SecureCluster

pytestmark = pytest.mark.integration

T = TypeVar("T")
RBAC = "rbac.authorization.k8s.io/v1"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _namespace(admin: ApiClient) -> str:
    name = _unique("au5")
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def _grant(admin: ApiClient, user: str, rules: list[Obj], *,
                 namespace: str | None) -> None:
    """A Role + RoleBinding in `namespace`, or a ClusterRole + ClusterRoleBinding."""
    name = _unique("scope")
    role_kind, binding_kind = ("Role", "RoleBinding") if namespace else (
        "ClusterRole", "ClusterRoleBinding")
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    await admin.create({"apiVersion": RBAC, "kind": role_kind, "metadata": meta,
                        "rules": rules})
    await admin.create({"apiVersion": RBAC, "kind": binding_kind, "metadata": meta,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                    "kind": role_kind, "name": name},
                        "subjects": [{"kind": "User", "name": user}]})


async def _eventually(make: Callable[[], Awaitable[T]]) -> T:
    """RBAC changes reach the authorizer within its refresh interval (1 s)."""
    for _ in range(40):
        try:
            return await make()
        except ApiError as err:
            if err.reason != Reason.FORBIDDEN:
                raise
        await asyncio.sleep(0.25)
    return await make()


async def _refused(call: Awaitable[object], reason: Reason) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    assert err.value.reason == reason, err.value.message
    return err.value


async def _watch_first(client: ApiClient, namespace: object) -> object:
    """The first event of a gRPC watch of Secrets with this (raw) namespace."""
    events = client.watch("secrets", namespace, timeout_seconds=5)  # type: ignore[arg-type]
    try:
        return await anext(events)
    finally:
        await events.aclose()


def _secret(name: str, namespace: str, password: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"password": password}}


def _configmap(name: str, namespace: str, value: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"value": value}}


# -- item 1: a request without a namespace is cluster-scoped --------------------------------


async def test_au5_grpc_list_and_watch_without_namespace_are_cluster_scoped(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """The finding: a user allowed to list Secrets in `default` listed and watched every
    Secret of the cluster by leaving the namespace out. Kubernetes: cluster scope, 403."""
    other = await _namespace(admin)
    await admin.create(_secret("elsewhere", other, "hunter2"))
    user = _unique("tenant")
    await _grant(admin, user, [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["list"]},
    ], namespace="default")
    async with secure_cluster.client(secure_cluster.user(user)) as tenant:
        mine = await _eventually(lambda: tenant.list("secrets", "default"))
        assert all(s["metadata"]["namespace"] == "default" for s in mine["items"])

        for namespace in (None, ""):
            denied = await _refused(tenant.list("secrets", namespace), Reason.FORBIDDEN)
            assert denied.message.startswith(
                f'secrets is forbidden: User "{user}" cannot list resource "secrets" in API '
                'group "" at the cluster scope'), denied.message
            denied = await _refused(_watch_first(tenant, namespace), Reason.FORBIDDEN)
            assert "cannot watch resource \"secrets\"" in denied.message
            assert "at the cluster scope" in denied.message
            denied = await _refused(tenant.call("PodMetrics", {"namespace": namespace}),
                                    Reason.FORBIDDEN)
            assert denied.message.startswith(
                f'pods.metrics.k8s.io is forbidden: User "{user}" cannot list resource '
                '"pods" in API group "metrics.k8s.io" at the cluster scope'), denied.message
        # the same read in the user's own namespace still works
        metrics = await tenant.call("PodMetrics", {"namespace": "default"})
        assert isinstance(metrics["items"], list)

    # a user with cluster-wide rights gets the cluster-wide list it asked for
    cluster_user = _unique("auditor")
    await _grant(admin, cluster_user, [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}], namespace=None)
    async with secure_cluster.client(secure_cluster.user(cluster_user)) as auditor:
        everything = await _eventually(lambda: auditor.list("secrets"))
        assert (other, "elsewhere") in {(s["metadata"]["namespace"], s["metadata"]["name"])
                                        for s in everything["items"]}


async def test_au5_grpc_namespace_that_is_not_a_string_is_400(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """`namespace: 0` (or a list) is malformed: 400 naming the field, never "all"."""
    other = await _namespace(admin)
    await admin.create(_secret("elsewhere", other, "hunter2"))
    user = _unique("tenant")
    await _grant(admin, user, [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["list"]},
    ], namespace="default")
    async with secure_cluster.client(secure_cluster.user(user)) as tenant:
        await _eventually(lambda: tenant.list("secrets", "default"))
        for namespace in (0, ["default"]):
            bad = await _refused(tenant.list("secrets", namespace),  # type: ignore[arg-type]
                                 Reason.BAD_REQUEST)
            assert bad.message.startswith("namespace: Invalid value: "), bad.message
            assert bad.message.endswith("must be a string"), bad.message
            bad = await _refused(_watch_first(tenant, namespace), Reason.BAD_REQUEST)
            assert bad.message.startswith("namespace: "), bad.message
            bad = await _refused(tenant.call("PodMetrics", {"namespace": namespace}),
                                 Reason.BAD_REQUEST)
            assert bad.message.startswith("namespace: "), bad.message
            bad = await _refused(tenant.call("Get", {"resource": "secrets",
                                                     "namespace": namespace,
                                                     "name": "elsewhere"}),
                                 Reason.BAD_REQUEST)
            assert bad.message.startswith("namespace: "), bad.message


async def test_au5_grpc_list_is_authorized_for_the_names_it_reads(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """A List reads what its selectors pick, whatever `name` the request carries: a user
    who may list only ConfigMap `allowed` lists it by `metadata.name=allowed` (as
    Kubernetes authorizes such a list for that name), not the namespace by adding a name."""
    ns = await _namespace(admin)
    await admin.create(_configmap("allowed", ns, "mine"))
    await admin.create(_configmap("victim", ns, "theirs"))
    user = _unique("reader")
    await _grant(admin, user, [{"apiGroups": [""], "resources": ["configmaps"],
                                "resourceNames": ["allowed"], "verbs": ["list", "watch"]}],
                 namespace=ns)
    async with secure_cluster.client(secure_cluster.user(user)) as reader:
        mine = await _eventually(lambda: reader.list(
            "configmaps", ns, field_selector="metadata.name=allowed"))
        assert [c["metadata"]["name"] for c in mine["items"]] == ["allowed"]
        denied = await _refused(reader.call("List", {
            "resource": "configmaps", "namespace": ns, "name": "allowed", "options": {}}),
            Reason.FORBIDDEN)
        assert denied.message.startswith(
            f'configmaps is forbidden: User "{user}" cannot list resource "configmaps"'), (
            denied.message)
        await _refused(reader.list("configmaps", ns), Reason.FORBIDDEN)


# -- item 4: the name (and namespace) in a write's body must match its URL ----------------


def _https(cluster: SecureCluster, pair: CertPair, method: str, path: str, body: Obj, *,
           content_type: str = "application/json") -> tuple[int, Obj]:
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    request = urllib.request.Request(f"{cluster.https}{path}", method=method,
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        with err:
            return int(err.code), json.loads(err.read())


async def _may_update_only_allowed(admin: ApiClient, user: str, namespace: str) -> None:
    await admin.create(_configmap("allowed", namespace, "mine"))
    await admin.create(_configmap("victim", namespace, "theirs"))
    await _grant(admin, user, [{"apiGroups": [""], "resources": ["configmaps"],
                                "resourceNames": ["allowed"],
                                "verbs": ["get", "update", "patch"]}], namespace=namespace)


async def test_au5_put_name_swap_over_https_is_400_and_victim_unchanged(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    ns = await _namespace(admin)
    user = _unique("editor")
    pair = secure_cluster.user(user)
    await _may_update_only_allowed(admin, user, ns)
    url = f"/api/v1/namespaces/{ns}/configmaps"

    async def put(name: str, body: Obj, **kw: str) -> tuple[int, Obj]:
        return await asyncio.to_thread(_https, secure_cluster, pair, "PUT", f"{url}/{name}",
                                       body, **kw)

    for _ in range(40):  # RBAC propagation: the user's own object first
        code, _body = await put("allowed", _configmap("allowed", ns, "mine, updated"))
        if code != 403:
            break
        await asyncio.sleep(0.25)
    assert code == 200, _body

    code, status = await put("allowed", _configmap("victim", ns, "owned"))
    assert code == 400, status
    assert status["reason"] == "BadRequest"
    assert status["message"] == ("the name of the object (victim) does not match the name "
                                 "on the URL (allowed)")

    code, status = await asyncio.to_thread(
        _https, secure_cluster, pair, "PATCH", f"{url}/allowed",
        {"metadata": {"name": "victim"}, "data": {"value": "owned"}},
        content_type="application/merge-patch+json")
    assert code == 400, status
    assert status["message"] == ("the name of the object (victim) does not match the name "
                                 "on the URL (allowed)")

    moved = _configmap("allowed", "kube-system", "owned")
    code, status = await put("allowed", moved)
    assert code == 400, status
    assert status["message"] == ("the namespace of the provided object does not match the "
                                 "namespace sent on the request")

    victim = await admin.get("configmaps", "victim", ns)
    assert victim["data"] == {"value": "theirs"}
    allowed = await admin.get("configmaps", "allowed", ns)
    assert allowed["data"] == {"value": "mine, updated"}


async def test_au5_grpc_update_name_swap_is_refused_and_victim_unchanged(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """gRPC's equivalent of the URL is the request's `name`: a body naming another object
    is the same 400; without `name`, the body's object is what is authorized (403)."""
    ns = await _namespace(admin)
    user = _unique("editor")
    await _may_update_only_allowed(admin, user, ns)
    async with secure_cluster.client(secure_cluster.user(user)) as editor:
        mine = await _eventually(lambda: editor.get("configmaps", "allowed", ns))
        mine["data"] = {"value": "mine, updated"}
        await editor.update(mine)

        swapped = _configmap("victim", ns, "owned")
        bad = await _refused(editor.call("Update", {
            "resource": "configmaps", "namespace": ns, "name": "allowed",
            "object": swapped}), Reason.BAD_REQUEST)
        assert bad.message == ("the name of the object (victim) does not match the name on "
                               "the URL (allowed)")
        denied = await _refused(editor.update(swapped), Reason.FORBIDDEN)
        assert denied.message.startswith(
            f'configmaps "victim" is forbidden: User "{user}" cannot update'), denied.message
        bad = await _refused(editor.call("Update", {
            "resource": "configmaps", "namespace": ns, "name": "allowed",
            "object": _configmap("allowed", "kube-system", "owned")}), Reason.BAD_REQUEST)
        assert bad.message == ("the namespace of the provided object does not match the "
                               "namespace sent on the request")

    victim = await admin.get("configmaps", "victim", ns)
    assert victim["data"] == {"value": "theirs"}


async def test_au5_binding_and_eviction_must_name_the_pod_they_are_posted_to(
        admin: ApiClient) -> None:
    ns = await _namespace(admin)
    await admin.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "p", "namespace": ns},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "other", "namespace": ns},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    bad = await _refused(admin.call("Bind", {"namespace": ns, "name": "p",
                                             "object": binding}), Reason.BAD_REQUEST)
    assert bad.message == "name in URL does not match name in Binding object"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "other", "namespace": ns}}
    bad = await _refused(admin.call("Evict", {"namespace": ns, "name": "p",
                                              "object": eviction}), Reason.BAD_REQUEST)
    assert bad.message == "name in URL does not match name in Eviction object"
    pod = await admin.get("pods", "p", ns)
    assert not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
    bound = await admin.bind(ns, "p", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"


# -- item 8: history and past revisions need what a list needs -----------------------------


async def _rotated_secret(admin: ApiClient, namespace: str) -> list[int]:
    """A Secret whose password was rotated twice; the revisions of its three versions."""
    created = await admin.create(_secret("db", namespace, "first-password"))
    revisions = [int(created["metadata"]["resourceVersion"])]
    for password in ("second-password", "third-password"):
        current = await admin.get("secrets", "db", namespace)
        current.pop("data", None)
        current["stringData"] = {"password": password}
        updated = await admin.update(current)
        revisions.append(int(updated["metadata"]["resourceVersion"]))
    return revisions


async def test_history_needs_list_authorization_over_grpc(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    ns = await _namespace(admin)
    revisions = await _rotated_secret(admin, ns)
    getter, lister = _unique("getter"), _unique("lister")
    await _grant(admin, getter, [{"apiGroups": [""], "resources": ["secrets"],
                                  "verbs": ["get"]}], namespace=ns)
    await _grant(admin, lister, [{"apiGroups": [""], "resources": ["secrets"],
                                  "verbs": ["get", "list"]}], namespace=ns)
    first = revisions[0]

    async with secure_cluster.client(secure_cluster.user(getter)) as client:
        current = await _eventually(lambda: client.get("secrets", "db", ns))
        assert current["metadata"]["resourceVersion"] == str(revisions[-1])
        denied = await _refused(client.history("secrets", "db", ns), Reason.FORBIDDEN)
        assert denied.message.startswith(
            f'secrets "db" is forbidden: User "{getter}" cannot list resource "secrets" in '
            f'API group "" in the namespace "{ns}"'), denied.message
        denied = await _refused(client.get("secrets", "db", ns, revision=first),
                                Reason.FORBIDDEN)
        assert "cannot list resource" in denied.message
        await _refused(client.list("secrets", ns, revision=first), Reason.FORBIDDEN)

    async with secure_cluster.client(secure_cluster.user(lister)) as client:
        versions = await _eventually(lambda: client.history("secrets", "db", ns))
        assert [v["revision"] for v in versions] == revisions
        old = await client.get("secrets", "db", ns, revision=first)
        assert old["metadata"]["resourceVersion"] == str(first)
        listed = await client.list("secrets", ns, revision=first)
        assert [s["metadata"]["name"] for s in listed["items"]] == ["db"]


async def test_history_needs_list_authorization_over_https(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """Over HTTPS a read at a past revision is a list (`resourceVersionMatch=Exact`); a
    GET of one object answers the current version, never an old one."""
    ns = await _namespace(admin)
    revisions = await _rotated_secret(admin, ns)
    getter = _unique("getter")
    pair = secure_cluster.user(getter)
    await _grant(admin, getter, [{"apiGroups": [""], "resources": ["secrets"],
                                  "verbs": ["get"]}], namespace=ns)
    async with secure_cluster.client(pair) as client:
        await _eventually(lambda: client.get("secrets", "db", ns))
    context = ssl.create_default_context(cafile=str(secure_cluster.pki.ca))
    context.load_cert_chain(str(pair.cert), str(pair.key))

    def get(path: str) -> tuple[int, Obj]:
        request = urllib.request.Request(f"{secure_cluster.https}{path}")
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                return int(resp.status), json.loads(resp.read())
        except urllib.error.HTTPError as err:
            with err:
                return int(err.code), json.loads(err.read())

    url = f"/api/v1/namespaces/{ns}/secrets"
    code, status = await asyncio.to_thread(
        get, f"{url}?resourceVersion={revisions[0]}&resourceVersionMatch=Exact")
    assert code == 403, status
    assert "cannot list resource" in status["message"]
    code, body = await asyncio.to_thread(get, f"{url}/db?resourceVersion={revisions[0]}")
    if code == 200:
        assert body["metadata"]["resourceVersion"] == str(revisions[-1]), body
    else:
        assert code in (400, 403), body
