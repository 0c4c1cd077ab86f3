"""Who is asking and may they (SPEC AU1-AU3): user info, request attributes, decisions.

The apiserver authenticates a request into a `UserInfo` (client certificate: CN → name,
O → groups; or a bearer token from a static token file), describes it as `Attributes`
(Kubernetes' authorizer.Attributes: verb, API group, resource, subresource, namespace,
name) and asks an `Authorizer`. This module holds the pure parts every caller shares:

    decision = await authorizer.authorize(Attributes(user=user, verb="create",
                                                     resource="pods", namespace="ns"))
    if not decision.allowed: raise forbidden(attrs, decision.reason)

`RbacRules` evaluates Role/ClusterRole/RoleBinding/ClusterRoleBinding objects exactly as
Kubernetes' RBAC authorizer does (no aggregation); `node_identity` recognises a kubelet.
The Node authorizer and NodeRestriction live in the apiserver, which can read the pods.
"""

from __future__ import annotations

import csv
import enum
import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj

MASTERS_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
NODE_USER_PREFIX = "system:node:"

READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (Kubernetes' user.Info)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_authenticated(self) -> UserInfo:
        if AUTHENTICATED_GROUP in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED_GROUP), self.extra)


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


@dataclass(frozen=True)
class Attributes:
    """One request as the authorizer sees it (Kubernetes' authorizer.AttributesRecord).

    `resource` is empty for a non-resource request, whose `path` is set instead."""

    user: UserInfo
    verb: str
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    api_group: str = ""
    path: str = ""

    @property
    def is_resource_request(self) -> bool:
        return bool(self.resource)


class Decision(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"
    NO_OPINION = "NoOpinion"


@dataclass(frozen=True)
class AuthorizationResult:
    decision: Decision
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


class Authorizer(Protocol):
    """`await authorizer.authorize(attrs)`: one decision, with a reason for a denial."""

    async def authorize(self, attrs: Attributes) -> AuthorizationResult: ...


def node_identity(user: UserInfo) -> str | None:
    """The node name of a kubelet's identity (`system:node:<name>` in `system:nodes`)."""
    if NODES_GROUP in user.groups and user.name.startswith(NODE_USER_PREFIX):
        return user.name.removeprefix(NODE_USER_PREFIX) or None
    return None


def unauthorized() -> ApiError:
    """401, Kubernetes' exact message."""
    return ApiError.unauthorized()


def forbidden(attrs: Attributes, reason: str = "") -> ApiError:
    """403 in Kubernetes' words, e.g. `pods is forbidden: User "x" cannot create resource
    "pods" in API group "" in the namespace "y"`, `deployments.apps "web" is forbidden: ...`,
    `pods "p" is forbidden: ... resource "pods/exec" ...`."""
    user = attrs.user.name
    if not attrs.is_resource_request:
        message = (f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"')
    else:
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        # the error's GroupResource: no subresource, the group after a dot (apierrors)
        qualified = attrs.resource + (f".{attrs.api_group}" if attrs.api_group else "")
        subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
        scope = (f'in the namespace "{attrs.namespace}"' if attrs.namespace
                 else "at the cluster scope")
        message = (f'{subject} is forbidden: User "{user}" cannot {attrs.verb} resource '
                   f'"{resource}" in API group "{attrs.api_group}" {scope}')
    if reason:
        message += f": {reason}"
    return ApiError(Reason.FORBIDDEN, message)


# -- static token file (--token-auth-file) ---------------------------------------------------


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """Kubernetes' static token CSV: `token,user,uid,"group1,group2"` per line."""
    tokens: dict[str, UserInfo] = {}
    for lineno, row in enumerate(csv.reader(io.StringIO(path.read_text())), start=1):
        if not row or row[0].startswith("#"):
            continue
        if len(row) < 3:
            raise ValueError(f"{path}:{lineno}: want token,user,uid[,\"group1,group2\"]")
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 \
            else ()
        tokens[row[0].strip()] = UserInfo(row[1].strip(), row[2].strip(), groups)
    return tokens


# -- RBAC ------------------------------------------------------------------------------------


def _matches(values: Iterable[Any], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    """One PolicyRule against one request (Kubernetes' rbac.RuleAllows)."""
    if not _matches(rule.get("verbs") or (), attrs.verb):
        return False
    if not attrs.is_resource_request:
        return any(u == "*" or u == attrs.path
                   or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or ())
    if not _matches(rule.get("apiGroups") or (), attrs.api_group):
        return False
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    resources = rule.get("resources") or ()
    if not any(r == "*" or r == resource
               or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _describe_subject(subject: Obj, binding_namespace: str) -> str:
    """A binding's subject as Kubernetes' RBAC reasons name it: `User "alice"`,
    `ServiceAccount "name/namespace"`."""
    kind, name = str(subject.get("kind") or ""), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        name = f"{name}/{subject.get('namespace') or binding_namespace}"
    return f'{kind} "{name}"'


def _describe_binding(binding: Obj, subject: Obj) -> str:
    """How Kubernetes' RBAC authorizer names the binding that allowed a request:
    `ClusterRoleBinding "x" of ClusterRole "y" to User "z"`, `RoleBinding "x/ns" of Role
    "y" to Group "g"`."""
    meta = binding.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    ref = binding.get("roleRef") or {}
    named = (f'RoleBinding "{meta.get("name", "")}/{namespace}"' if namespace
             else f'ClusterRoleBinding "{meta.get("name", "")}"')
    return (f'{named} of {ref.get("kind", "")} "{ref.get("name", "")}" to '
            f"{_describe_subject(subject, namespace)}")


def _subject_matches(subject: Obj, user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


@dataclass(frozen=True)
class RbacRules:
    """A snapshot of the four RBAC kinds, evaluated like Kubernetes' RBAC authorizer."""

    roles: Mapping[tuple[str, str], Obj]  # (namespace, name) -> Role
    cluster_roles: Mapping[str, Obj]
    role_bindings: Sequence[Obj]
    cluster_role_bindings: Sequence[Obj]

    @classmethod
    def from_objects(cls, *, roles: Iterable[Obj], cluster_roles: Iterable[Obj],
                     role_bindings: Iterable[Obj],
                     cluster_role_bindings: Iterable[Obj]) -> RbacRules:
        return cls(
            roles={(r["metadata"].get("namespace", ""), r["metadata"]["name"]): r
                   for r in roles},
            cluster_roles={r["metadata"]["name"]: r for r in cluster_roles},
            role_bindings=list(role_bindings),
            cluster_role_bindings=list(cluster_role_bindings))

    def role_rules(self, ref: Obj, namespace: str) -> list[Obj] | None:
        """The rules of the role a binding's `roleRef` names (a Role is looked up in
        `namespace`, the binding's), or None when there is no such role (Kubernetes'
        GetRoleReferenceRules)."""
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        role = (self.cluster_roles.get(name) if kind == "ClusterRole"
                else self.roles.get((namespace, name)) if kind == "Role" else None)
        return None if role is None else list(role.get("rules") or ())

    def _bindings(self, user: UserInfo, namespace: str
                  ) -> Iterator[tuple[str, Obj, list[Obj] | None]]:
        """The bindings naming `user` that apply in `namespace`, each as (how Kubernetes
        names it in a reason, its roleRef, its role's rules or None if the role does not
        exist): ClusterRoleBindings first, then the namespace's RoleBindings (Kubernetes'
        VisitRulesFor)."""
        for binding in self.cluster_role_bindings:
            subject = next((s for s in binding.get("subjects") or ()
                            if _subject_matches(s, user, "")), None)
            if subject is not None:
                ref = binding.get("roleRef") or {}
                yield _describe_binding(binding, subject), ref, self.role_rules(ref, "")
        for binding in self.role_bindings if namespace else ():
            ns = binding["metadata"].get("namespace", "")
            subject = next((s for s in binding.get("subjects") or ()
                            if _subject_matches(s, user, ns)), None) if ns == namespace \
                else None
            if subject is not None:
                ref = binding.get("roleRef") or {}
                yield _describe_binding(binding, subject), ref, self.role_rules(ref, ns)

    def rules_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        """Every rule `user` holds in `namespace` (Kubernetes' RBAC RulesFor)."""
        return [rule for _, _, rules in self._bindings(user, namespace)
                for rule in rules or ()]

    def unresolved_role_refs(self, user: UserInfo, namespace: str) -> list[Obj]:
        """The roleRefs of the bindings naming `user` in `namespace` whose role does not
        exist: the errors Kubernetes' RulesFor returns beside the rules it found."""
        return [ref for _, ref, rules in self._bindings(user, namespace) if rules is None]

    def authorize(self, attrs: Attributes) -> AuthorizationResult:
        for binding, _, rules in self._bindings(attrs.user, attrs.namespace):
            if any(rule_allows(rule, attrs) for rule in rules or ()):
                return AuthorizationResult(Decision.ALLOW, f"RBAC: allowed by {binding}")
        return AuthorizationResult(Decision.NO_OPINION)
