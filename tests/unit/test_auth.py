"""SPEC AU3's pure parts: RBAC rule evaluation, Kubernetes' 403 wording, the static token
file, and NodeRestriction's label and taint rules (the apiserver tests drive them for real)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiff.api.kinds import lookup
from skiff.apiserver.admission.noderestriction import node_restriction
from skiff.apiserver.auth.context import current_user
from skiff.auth import (
    Attributes,
    Decision,
    RbacRules,
    UserInfo,
    forbidden,
    load_token_file,
    node_identity,
    rule_allows,
)

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))
NODE1 = UserInfo("system:node:node-1", groups=("system:nodes", "system:authenticated"))


def attrs(verb: str, resource: str, *, sub: str = "", ns: str = "", name: str = "",
          group: str = "", user: UserInfo = ALICE) -> Attributes:
    return Attributes(user=user, verb=verb, resource=resource, subresource=sub,
                      namespace=ns, name=name, api_group=group)


@pytest.mark.parametrize(("rule", "request_attrs", "allowed"), [
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
                 attrs("create", "pods", ns="a"), True, id="exact"),
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                 attrs("create", "pods", ns="a"), False, id="other-verb"),
    pytest.param({"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["*"]},
                 attrs("create", "pods", ns="a"), False, id="other-group"),
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": ["update"]},
                 attrs("update", "pods", sub="status", ns="a"), False,
                 id="subresource-needs-its-own-rule"),
    pytest.param({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
                 attrs("update", "pods", sub="status", ns="a"), True, id="subresource"),
    pytest.param({"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["update"]},
                 attrs("update", "replicasets", sub="scale", group="apps"), True,
                 id="any-resource-subresource"),
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"],
                  "resourceNames": ["p1"]}, attrs("get", "pods", name="p2"), False,
                 id="resource-names"),
    pytest.param({"nonResourceURLs": ["/healthz*"], "verbs": ["get"]},
                 Attributes(user=ALICE, verb="get", path="/healthz/etcd"), True,
                 id="non-resource-prefix"),
])
def test_AU3_rbac_rule_allows(rule: dict[str, Any], request_attrs: Attributes,
                              allowed: bool) -> None:
    assert rule_allows(rule, request_attrs) is allowed


def _rules() -> RbacRules:
    role = {"metadata": {"name": "pods", "namespace": "a"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}
    binding = {"metadata": {"name": "b", "namespace": "a"},
               "roleRef": {"kind": "Role", "name": "pods"},
               "subjects": [{"kind": "Group", "name": "devs"}]}
    return RbacRules.from_objects(roles=[role], cluster_roles=[], role_bindings=[binding],
                                  cluster_role_bindings=[])


def test_AU3_role_binding_grants_only_in_its_namespace() -> None:
    rules = _rules()
    assert rules.authorize(attrs("create", "pods", ns="a")).decision is Decision.ALLOW
    assert rules.authorize(attrs("create", "pods", ns="b")).decision is Decision.NO_OPINION
    assert rules.authorize(attrs("create", "pods")).decision is Decision.NO_OPINION
    bob = UserInfo("bob", groups=("system:authenticated",))
    assert rules.authorize(attrs("create", "pods", ns="a", user=bob)).decision \
        is Decision.NO_OPINION


def test_AU3_forbidden_messages_are_kubernetes() -> None:
    assert forbidden(attrs("create", "pods", ns="y")).message == (
        'pods is forbidden: User "alice" cannot create resource "pods" in API group "" in '
        'the namespace "y"')
    assert forbidden(attrs("update", "nodes", sub="status", name="n2")).message == (
        'nodes "n2" is forbidden: User "alice" cannot update resource '
        '"nodes/status" in API group "" at the cluster scope')
    assert forbidden(attrs("get", "deployments", ns="y", name="web", group="apps")).message == (
        'deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments" '
        'in API group "apps" in the namespace "y"')
    assert forbidden(attrs("create", "pods", ns="y")).code == 403


def test_AU1_token_file_is_kubernetes_csv(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('t1,alice,1000,"devs,ops"\nt2,bob,1001\n')
    tokens = load_token_file(path)
    assert tokens["t1"] == UserInfo("alice", "1000", ("devs", "ops"))
    assert tokens["t2"].groups == ()


def test_AU2_node_identity() -> None:
    assert node_identity(NODE1) == "node-1"
    assert node_identity(UserInfo("system:node:node-1")) is None  # not in system:nodes
    assert node_identity(ALICE) is None


def _node(labels: dict[str, str] | None = None, taints: list[Any] | None = None
          ) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "node-1", "labels": labels or {}},
            "spec": {"taints": taints or []}}


@pytest.mark.parametrize(("new", "refused"), [
    pytest.param(_node({"kubelet.kubernetes.io/x": "1"}), False, id="kubelet-prefix"),
    pytest.param(_node({"topology.kubernetes.io/zone": "a"}), False, id="well-known"),
    pytest.param(_node({"team": "x"}), False, id="unprefixed"),
    pytest.param(_node({"node-restriction.kubernetes.io/t": "1"}), True,
                 id="node-restriction"),
    pytest.param(_node({"node-role.kubernetes.io/control-plane": ""}), True,
                 id="kubernetes-io-domain"),
    pytest.param(_node(taints=[{"key": "k", "effect": "NoExecute"}]), True, id="taint"),
])
def test_AU3_node_restriction_on_own_node(new: dict[str, Any], refused: bool) -> None:
    token = current_user.set(NODE1)
    try:
        if refused:
            with pytest.raises(Exception) as err:
                node_restriction(lookup("nodes"), new, _node())
            assert "is forbidden: node 'node-1' is not allowed" in str(err.value)
        else:
            node_restriction(lookup("nodes"), new, _node())
    finally:
        current_user.reset(token)
