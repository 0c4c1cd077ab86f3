"""SPEC AU6's pure parts: which held rules cover which granted rules (Kubernetes'
Covers), the message naming what is missing, and the decisions on Roles and bindings
over a snapshot of the RBAC objects (the real cluster is in
tests/integration/auth/test_escalation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.kinds import lookup
from skiff.api.types import Obj
from skiff.apiserver.auth.bootstrappolicy import bootstrap_policy
from skiff.apiserver.auth.escalation import (
    AGGREGATION_RULE_MESSAGE,
    binding_escalation,
    compact_string,
    covers,
    go_quote,
    not_held,
    only_gc_fields_change,
    role_escalation,
)
from skiff.auth import RbacRules, UserInfo

RBAC = "rbac.authorization.k8s.io"
BOB = UserInfo("bob", groups=("developers", "system:authenticated"))


def rule(verbs: list[str], resources: list[str] | None = None, *, groups: list[str] | None = None,
         names: list[str] | None = None, urls: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs}
    if resources is not None:
        out["apiGroups"] = [""] if groups is None else groups
        out["resources"] = resources
    if names:
        out["resourceNames"] = names
    if urls:
        out["nonResourceURLs"] = urls
    return out


@pytest.mark.parametrize(("held", "granted", "covered"), [
    pytest.param([rule(["get"], ["pods"])], [rule(["get"], ["pods"])], True, id="same"),
    pytest.param([rule(["get"], ["pods"])], [rule(["get", "list"], ["pods"])], False,
                 id="one-verb-more"),
    pytest.param([rule(["get"], ["pods"]), rule(["list"], ["pods"])],
                 [rule(["get", "list"], ["pods"])], True, id="split-over-two-rules"),
    pytest.param([rule(["*"], ["pods"])], [rule(["delete"], ["pods"])], True,
                 id="verb-star"),
    pytest.param([rule(["get"], ["pods"])], [rule(["*"], ["pods"])], False,
                 id="star-is-not-every-verb-held"),
    pytest.param([rule(["get"], ["*"], groups=["*"])], [rule(["get"], ["deployments"],
                                                             groups=["apps"])], True,
                 id="group-and-resource-star"),
    pytest.param([rule(["get"], ["pods"], groups=["apps"])], [rule(["get"], ["pods"])], False,
                 id="other-group"),
    pytest.param([rule(["update"], ["pods"])], [rule(["update"], ["pods/status"])], False,
                 id="resource-is-not-its-subresource"),
    pytest.param([rule(["update"], ["*/status"])], [rule(["update"], ["pods/status"])], True,
                 id="any-resource-subresource"),
    pytest.param([rule(["update"], ["*/status"])], [rule(["update"], ["pods"])], False,
                 id="subresource-star-is-not-the-resource"),
    pytest.param([rule(["get"], ["secrets"], names=["a"])],
                 [rule(["get"], ["secrets"], names=["a"])], True, id="same-name"),
    pytest.param([rule(["get"], ["secrets"], names=["a"])],
                 [rule(["get"], ["secrets"], names=["a", "b"])], False, id="one-name-more"),
    pytest.param([rule(["get"], ["secrets"], names=["a"])], [rule(["get"], ["secrets"])],
                 False, id="named-does-not-cover-all"),
    pytest.param([rule(["get"], ["secrets"])], [rule(["get"], ["secrets"], names=["a"])],
                 True, id="all-covers-named"),
    pytest.param([rule(["get"], urls=["/healthz*"])], [rule(["get"], urls=["/healthz/etcd"])],
                 True, id="url-prefix"),
    pytest.param([rule(["get"], urls=["/healthz"])], [rule(["get"], urls=["/healthz/etcd"])],
                 False, id="url-exact"),
    pytest.param([rule(["*"], ["*"], groups=["*"])], [rule(["get"], urls=["/metrics"])],
                 False, id="resources-do-not-cover-urls"),
    pytest.param([rule(["*"], urls=["*"])], [rule(["get"], ["pods"])], False,
                 id="urls-do-not-cover-resources"),
    pytest.param([], [], True, id="nothing-granted"),
])
def test_au6_held_rules_cover_granted_rules(held: list[Obj], granted: list[Obj],
                                            covered: bool) -> None:
    assert covers(held, granted)[0] is covered


def test_au6_missing_rules_are_broken_down_to_one_verb_resource_and_name() -> None:
    _, missing = covers([rule(["get"], ["pods"])],
                        [rule(["get", "list"], ["pods", "secrets"], names=["a"])])
    assert [compact_string(r) for r in missing] == [
        '{APIGroups:[""], Resources:["pods"], ResourceNames:["a"], Verbs:["list"]}',
        '{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get"]}',
        '{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["list"]}']


@pytest.mark.parametrize(("text", "quoted"), [
    pytest.param("bob", '"bob"', id="plain"),
    pytest.param("", '""', id="empty"),
    pytest.param('a"b\\c', '"a\\"b\\\\c"', id="quote-and-backslash"),
    pytest.param("a\nb\x01", '"a\\nb\\x01"', id="control"),
    pytest.param("héllo", '"héllo"', id="printable-unicode"),
])
def test_au6_names_are_quoted_as_go_prints_them(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


def _rbac(*, roles: list[Obj] | None = None, cluster_roles: list[Obj] | None = None,
          role_bindings: list[Obj] | None = None,
          cluster_role_bindings: list[Obj] | None = None) -> RbacRules:
    return RbacRules.from_objects(roles=roles or [], cluster_roles=cluster_roles or [],
                                  role_bindings=role_bindings or [],
                                  cluster_role_bindings=cluster_role_bindings or [])


def _role(name: str, rules: list[Obj], namespace: str = "") -> Obj:
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": "Role" if namespace else "ClusterRole", "metadata": meta, "rules": rules}


def _binding(name: str, role_kind: str, role: str, namespace: str = "",
             subject: Obj | None = None) -> Obj:
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": "RoleBinding" if namespace else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
            "subjects": [subject or {"kind": "User", "name": "bob"}]}


CLUSTER_ADMIN = _role("cluster-admin", [rule(["*"], ["*"], groups=["*"]),
                                        rule(["*"], urls=["*"])])
RBAC_WRITER = _role("rbac-writer", [rule(["get", "list", "create", "update"],
                                         ["roles", "rolebindings"], groups=[RBAC])], "team")
# bob may write Roles and RoleBindings in `team`, nothing else
TENANT = _rbac(roles=[RBAC_WRITER], cluster_roles=[CLUSTER_ADMIN],
               role_bindings=[_binding("bob-rbac", "Role", "rbac-writer", "team")])


def test_au6_message_lists_what_is_not_held_as_kubernetes_does() -> None:
    message = not_held(TENANT, BOB, "team", [rule(["get", "list"], ["pods"]),
                                             rule(["get"], ["pods"]),
                                             rule(["get"], urls=["/metrics"])])
    assert message == (
        'user "bob" (groups=["developers" "system:authenticated"]) is attempting to grant '
        "RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}\n'
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}')


def test_au6_message_names_bindings_to_missing_roles() -> None:
    rbac = _rbac(role_bindings=[_binding("a", "Role", "gone", "team"),
                                _binding("b", "ClusterRole", "gone-too", "team")])
    message = not_held(rbac, BOB, "team", [rule(["get"], ["pods"])])
    assert message is not None and message.endswith(
        '; resolution errors: [[roles.rbac.authorization.k8s.io "gone" not found, '
        'clusterroles.rbac.authorization.k8s.io "gone-too" not found]]')


def _role_write(rbac: RbacRules, obj: Obj, old: Obj | None = None) -> str | None:
    info = lookup(obj["kind"])
    problem = role_escalation(rbac, user=BOB, info=info, obj=obj, old=old)
    return None if problem is None else f"{problem.code} {problem.message}"


def _binding_write(rbac: RbacRules, obj: Obj) -> str | None:
    problem = binding_escalation(rbac, user=BOB, info=lookup(obj["kind"]), obj=obj)
    return None if problem is None else f"{problem.code} {problem.message}"


@pytest.mark.parametrize(("obj", "refusal"), [
    pytest.param(_role("all", [rule(["*"], ["*"], groups=["*"])], "team"),
                 'roles.rbac.authorization.k8s.io "all" is forbidden: user "bob" '
                 '(groups=["developers" "system:authenticated"]) is attempting to grant RBAC '
                 'permissions not currently held:\n{APIGroups:["*"], Resources:["*"], '
                 'Verbs:["*"]}', id="role-granting-everything"),
    pytest.param(_role("readers", [rule(["get", "list"], ["roles"], groups=[RBAC])], "team"),
                 None, id="role-granting-what-is-held"),
    pytest.param(_role("elsewhere", [rule(["get"], ["roles"], groups=[RBAC])], "other"),
                 'roles.rbac.authorization.k8s.io "elsewhere" is forbidden: user "bob" '
                 '(groups=["developers" "system:authenticated"]) is attempting to grant RBAC '
                 'permissions not currently held:\n{APIGroups:["rbac.authorization.k8s.io"], '
                 'Resources:["roles"], Verbs:["get"]}', id="held-only-in-another-namespace"),
    pytest.param(_role("cluster-readers", [rule(["get"], ["roles"], groups=[RBAC])]),
                 'clusterroles.rbac.authorization.k8s.io "cluster-readers" is forbidden: user '
                 '"bob" (groups=["developers" "system:authenticated"]) is attempting to grant '
                 'RBAC permissions not currently held:\n{APIGroups:["rbac.authorization.k8s.io"'
                 '], Resources:["roles"], Verbs:["get"]}',
                 id="clusterrole-needs-cluster-wide-rights"),
])
def test_au6_role_writes(obj: Obj, refusal: str | None) -> None:
    assert _role_write(TENANT, obj) == (None if refusal is None else f"403 {refusal}")


def test_au6_aggregation_rule_needs_every_permission() -> None:
    aggregated = {**_role("agg", []), "aggregationRule": {
        "clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}
    everything = _rbac(cluster_roles=[CLUSTER_ADMIN], cluster_role_bindings=[
        _binding("bob-admin", "ClusterRole", "cluster-admin")])
    almost = _rbac(cluster_roles=[_role("all-resources", [rule(["*"], ["*"], groups=["*"])])],
                   cluster_role_bindings=[_binding("x", "ClusterRole", "all-resources")])
    assert _role_write(everything, aggregated) is None
    assert _role_write(almost, aggregated) == (
        f'403 clusterroles.rbac.authorization.k8s.io "agg" is forbidden: '
        f"{AGGREGATION_RULE_MESSAGE}")
    # removing the rule is changing it too
    assert _role_write(almost, _role("agg", []), old=aggregated) is not None


@pytest.mark.parametrize(("obj", "refusal"), [
    pytest.param(_binding("me-admin", "ClusterRole", "cluster-admin", "team"),
                 '403 rolebindings.rbac.authorization.k8s.io "me-admin" is forbidden: user '
                 '"bob" (groups=["developers" "system:authenticated"]) is attempting to grant '
                 'RBAC permissions not currently held:\n{APIGroups:["*"], Resources:["*"], '
                 'Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}',
                 id="rolebinding-to-cluster-admin"),
    pytest.param(_binding("again", "Role", "rbac-writer", "team",
                          {"kind": "User", "name": "carol"}), None,
                 id="binding-a-role-held"),
    pytest.param(_binding("missing", "Role", "nope", "team"),
                 '404 roles.rbac.authorization.k8s.io "nope" not found', id="missing-role"),
    pytest.param(_binding("global", "ClusterRole", "cluster-admin"),
                 '403 clusterrolebindings.rbac.authorization.k8s.io "global" is forbidden: '
                 'user "bob" (groups=["developers" "system:authenticated"]) is attempting to '
                 'grant RBAC permissions not currently held:\n{APIGroups:["*"], '
                 'Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}',
                 id="clusterrolebinding"),
])
def test_au6_binding_writes(obj: Obj, refusal: str | None) -> None:
    assert _binding_write(TENANT, obj) == refusal


@pytest.mark.parametrize(("change", "only_gc"), [
    pytest.param(lambda o: o["metadata"].update(finalizers=["x"]), True, id="finalizers"),
    pytest.param(lambda o: o["metadata"].update(ownerReferences=[{"uid": "u"}]), True,
                 id="owner-references"),
    pytest.param(lambda o: o["metadata"].pop("resourceVersion"), True,
                 id="unconditional"),
    pytest.param(lambda o: o["metadata"].update(labels={"a": "b"}), False, id="labels"),
    pytest.param(lambda o: o["rules"].append(rule(["get"], ["pods"])), False, id="rules"),
])
def test_au6_updates_of_only_what_the_garbage_collector_writes(change: Any,
                                                                only_gc: bool) -> None:
    old = _role("r", [rule(["get"], ["roles"], groups=[RBAC])], "team")
    old["metadata"]["resourceVersion"] = "7"
    new: Obj = {**old, "metadata": dict(old["metadata"]), "rules": list(old["rules"])}
    change(new)
    assert only_gc_fields_change(new, old) is only_gc


def _bootstrap_tenant(cluster_role: str) -> RbacRules:
    """bob bound to one of the bootstrap ClusterRoles in `team` only."""
    policy = bootstrap_policy()
    return _rbac(cluster_roles=[o for o in policy if o["kind"] == "ClusterRole"],
                 role_bindings=[_binding("bob", "ClusterRole", cluster_role, "team")])


@pytest.mark.parametrize(("held", "binds", "allowed"), [
    pytest.param("admin", "edit", True, id="admin-delegates-edit"),
    pytest.param("admin", "admin", True, id="admin-delegates-admin"),
    pytest.param("admin", "view", True, id="admin-delegates-view"),
    pytest.param("edit", "admin", False, id="edit-cannot-grant-admin"),
    pytest.param("admin", "cluster-admin", False, id="admin-cannot-grant-cluster-admin"),
])
def test_au6_namespace_admins_delegate_the_bootstrap_roles_they_hold(
        held: str, binds: str, allowed: bool) -> None:
    """Kubernetes' tenancy pattern: a namespace admin hands out `edit` or `view` there."""
    binding = _binding("delegated", "ClusterRole", binds, "team",
                       {"kind": "User", "name": "carol"})
    assert (_binding_write(_bootstrap_tenant(held), binding) is None) is allowed
