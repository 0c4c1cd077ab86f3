"""SPEC AU3: the bootstrapped `view`, `edit` and `admin` ClusterRoles grant what Kubernetes
1.32's aggregated roles grant, evaluated by the RBAC authorizer over the bootstrap policy
plus one RoleBinding, and a restarted apiserver corrects the roles an older Skiff wrote."""

from __future__ import annotations

import copy

import pytest

from skiff.api.types import Obj
from skiff.apiserver.auth.bootstrappolicy import bootstrap_policy
from skiff.apiserver.auth.rbac import RbacAuthorizer
from skiff.apiserver.auth.reconcile import reconcile_bootstrap_policy, reconciled
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.auth import Attributes, Decision, UserInfo

NS = "team"
SA = UserInfo("system:serviceaccount:team:bot", groups=("system:serviceaccounts",
                                                         "system:authenticated"))


async def _registry(objects: list[Obj]) -> Registry:
    """The apiserver's Registry over in-memory storage, holding `objects` as stored."""
    store = MemoryStorage()
    registry = Registry(store, WatchCache(store), config=RegistryConfig(pod_security=None))
    for obj in objects:
        await registry.ensure(obj)
    return registry


async def _revision(registry: Registry) -> int:
    """The storage's current revision: it moves with every write."""
    return await registry.storage.current_revision()


def _binding_to(role: str) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"bot-{role}", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": NS}]}


def _ask(verb: str, resource: str, *, group: str = "", sub: str = "") -> Attributes:
    return Attributes(user=SA, verb=verb, api_group=group, resource=resource,
                      subresource=sub, namespace=NS, name="")


VIEW_CASES = [
    pytest.param(_ask("list", "pods"), True, id="list-pods"),
    pytest.param(_ask("get", "pods", sub="log"), True, id="get-pods-log"),
    pytest.param(_ask("watch", "deployments", group="apps"), True, id="watch-deployments"),
    pytest.param(_ask("list", "horizontalpodautoscalers", group="autoscaling"), True,
                 id="list-hpa"),
    pytest.param(_ask("list", "pods", group="metrics.k8s.io"), True, id="list-pod-metrics"),
    pytest.param(_ask("get", "nodes", group="metrics.k8s.io"), True, id="get-node-metrics"),
    pytest.param(_ask("get", "secrets"), False, id="no-get-secrets"),
    pytest.param(_ask("list", "secrets"), False, id="no-list-secrets"),
    pytest.param(_ask("create", "pods", sub="exec"), False, id="no-exec"),
    pytest.param(_ask("get", "pods", sub="exec"), False, id="no-exec-get"),
    pytest.param(_ask("create", "pods"), False, id="no-create-pods"),
    pytest.param(_ask("list", "roles", group="rbac.authorization.k8s.io"), False,
                 id="no-read-roles"),
]

EDIT_CASES = [
    pytest.param(_ask("create", "deployments", group="apps"), True, id="create-deployments"),
    pytest.param(_ask("create", "services"), True, id="create-services"),
    pytest.param(_ask("create", "secrets"), True, id="create-secrets"),
    pytest.param(_ask("get", "secrets"), True, id="get-secrets"),
    pytest.param(_ask("create", "pods", sub="exec"), True, id="exec"),
    pytest.param(_ask("patch", "deployments", group="apps", sub="scale"), True,
                 id="scale-deployments"),
    pytest.param(_ask("create", "horizontalpodautoscalers", group="autoscaling"), True,
                 id="create-hpa"),
    pytest.param(_ask("list", "pods"), True, id="reads-what-view-reads"),
    pytest.param(_ask("list", "pods", group="metrics.k8s.io"), True, id="pod-metrics"),
    pytest.param(_ask("create", "roles", group="rbac.authorization.k8s.io"), False,
                 id="no-create-roles"),
    pytest.param(_ask("create", "rolebindings", group="rbac.authorization.k8s.io"), False,
                 id="no-create-rolebindings"),
    pytest.param(_ask("update", "pods", sub="status"), False, id="no-pod-status"),
    pytest.param(_ask("create", "resourcequotas"), False, id="no-quota"),
]

ADMIN_CASES = [
    pytest.param(_ask("create", "roles", group="rbac.authorization.k8s.io"), True,
                 id="create-roles"),
    pytest.param(_ask("create", "rolebindings", group="rbac.authorization.k8s.io"), True,
                 id="create-rolebindings"),
    pytest.param(_ask("create", "deployments", group="apps"), True, id="edits-what-edit-edits"),
    pytest.param(_ask("list", "horizontalpodautoscalers", group="autoscaling"), True,
                 id="list-hpa"),
    pytest.param(_ask("create", "clusterroles", group="rbac.authorization.k8s.io"), False,
                 id="no-cluster-roles"),
]


async def _decide(role: str, request: Attributes) -> bool:
    registry = await _registry([*bootstrap_policy(), _binding_to(role)])
    result = await RbacAuthorizer(registry, refresh_seconds=60).authorize(request)
    return result.decision is Decision.ALLOW


@pytest.mark.parametrize(("request_attrs", "allowed"), VIEW_CASES)
async def test_AU3_view_reads_without_secrets_or_exec(request_attrs: Attributes,
                                                      allowed: bool) -> None:
    assert await _decide("view", request_attrs) is allowed


@pytest.mark.parametrize(("request_attrs", "allowed"), EDIT_CASES)
async def test_AU3_edit_writes_workloads_but_not_rbac(request_attrs: Attributes,
                                                      allowed: bool) -> None:
    assert await _decide("edit", request_attrs) is allowed


@pytest.mark.parametrize(("request_attrs", "allowed"), ADMIN_CASES)
async def test_AU3_admin_grants_roles_in_its_namespace(request_attrs: Attributes,
                                                       allowed: bool) -> None:
    assert await _decide("admin", request_attrs) is allowed


async def test_AU3_admin_binding_grants_nothing_in_other_namespaces() -> None:
    other = Attributes(user=SA, verb="create", api_group="rbac.authorization.k8s.io",
                       resource="roles", namespace="elsewhere")
    registry = await _registry([*bootstrap_policy(), _binding_to("admin")])
    result = await RbacAuthorizer(registry).authorize(other)
    assert result.decision is not Decision.ALLOW


async def test_AU3_every_user_may_review_itself() -> None:
    registry = await _registry(bootstrap_policy())
    for group, resource in [("authorization.k8s.io", "selfsubjectaccessreviews"),
                            ("authorization.k8s.io", "selfsubjectrulesreviews"),
                            ("authentication.k8s.io", "selfsubjectreviews")]:
        ask = Attributes(user=SA, verb="create", api_group=group, resource=resource)
        result = await RbacAuthorizer(registry).authorize(ask)
        assert result.decision is Decision.ALLOW, resource


def test_AU3_default_roles_carry_kubernetes_labels() -> None:
    roles = {o["metadata"]["name"]: o for o in bootstrap_policy() if o["kind"] == "ClusterRole"}
    for name in ("admin", "edit", "view"):
        meta = roles[name]["metadata"]
        assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert meta["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    assert roles["view"]["metadata"]["labels"][
        "rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert roles["edit"]["metadata"]["labels"][
        "rbac.authorization.k8s.io/aggregate-to-admin"] == "true"


def _old_view() -> Obj:
    """`view` as an older Skiff bootstrapped it: every resource readable, Secrets too."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view",
                         "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [{"apiGroups": ["*"], "resources": ["*"],
                       "verbs": ["get", "list", "watch"]}]}


async def test_AU3_restart_replaces_the_rules_of_an_old_view_role() -> None:
    registry = await _registry([_old_view(), _binding_to("view")])
    old = await registry.get("clusterroles", None, "view")
    await reconcile_bootstrap_policy(registry)
    view = await registry.get("clusterroles", None, "view")
    wanted = next(o for o in bootstrap_policy() if o["metadata"]["name"] == "view")
    assert view["rules"] == wanted["rules"]
    # an update, not a re-create: the same object (uid), at a newer resourceVersion
    assert view["metadata"]["uid"] == old["metadata"]["uid"]
    assert int(view["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
    secrets = _ask("get", "secrets")
    result = await RbacAuthorizer(registry).authorize(secrets)
    assert result.decision is not Decision.ALLOW
    # created where it was missing
    assert await registry.get_or_none("clusterroles", None, "admin") is not None


async def test_AU3_reconcile_is_idempotent() -> None:
    registry = await _registry([])
    await reconcile_bootstrap_policy(registry)
    before = await _revision(registry)
    await reconcile_bootstrap_policy(registry)
    assert await _revision(registry) == before  # the second pass writes nothing


def test_AU3_reconcile_keeps_additions_and_honours_autoupdate_false() -> None:
    wanted = next(o for o in bootstrap_policy()
                  if o["metadata"]["name"] == "system:basic-user")
    extra = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    current = copy.deepcopy(wanted)
    current["rules"] = [extra]
    updated = reconciled(current, wanted)
    assert updated is not None
    assert updated["rules"] == [extra, *wanted["rules"]]  # added, nothing removed
    current["metadata"]["annotations"] = {
        "rbac.authorization.kubernetes.io/autoupdate": "false"}
    assert reconciled(current, wanted) is None
