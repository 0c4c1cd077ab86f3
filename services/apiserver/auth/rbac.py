"""RBAC and the apiserver's authorizer chain (SPEC AU2-AU3).

`RbacAuthorizer` evaluates the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects;
`ApiAuthorizer` is the chain the fronts ask (`check(attrs)`) before the registry runs:
`system:masters` bypasses, then the Node authorizer (kubelets), then RBAC.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from skiff.api.types import Obj
from skiff.apiserver.auth.node import NodeAuthorizer
from skiff.auth import (
    MASTERS_GROUP,
    Attributes,
    AuthorizationResult,
    Decision,
    RbacRules,
    UserInfo,
    forbidden,
    node_identity,
)

if TYPE_CHECKING:
    from skiff.apiserver.registry.store import Registry


class RbacAuthorizer:
    """RBAC over the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in etcd,
    re-read at most every `refresh_seconds` (Kubernetes' informers lag a little too)."""

    def __init__(self, registry: Registry, *, refresh_seconds: float = 1.0) -> None:
        self.registry = registry
        self.refresh_seconds = refresh_seconds
        self._rules: RbacRules | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self, *, newer_than: float | None = None) -> RbacRules:
        """The RBAC objects as last read, re-read when older than `refresh_seconds` or,
        with `newer_than` (a time.monotonic()), when read before then."""
        async with self._lock:
            if self._rules is None or time.monotonic() - self._read_at > self.refresh_seconds \
                    or (newer_than is not None and self._read_at <= newer_than):
                listed = [(await self.registry.list(r, None))["items"]
                          for r in ("roles", "clusterroles", "rolebindings",
                                    "clusterrolebindings")]
                self._rules = RbacRules.from_objects(
                    roles=listed[0], cluster_roles=listed[1], role_bindings=listed[2],
                    cluster_role_bindings=listed[3])
                self._read_at = time.monotonic()
            return self._rules

    async def rules_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        return (await self.snapshot()).rules_for(user, namespace)

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        asked = time.monotonic()
        result = (await self.snapshot()).authorize(attrs)
        if result.decision is Decision.ALLOW:
            return result
        # A denial is answered from rules read after the request arrived, so a binding made
        # just before is never missed (denials are rare; grants stay cached).
        return (await self.snapshot(newer_than=asked)).authorize(attrs)


class ApiAuthorizer:
    """The apiserver's authorizer chain: system:masters, Node, RBAC; the first ALLOW or
    DENY decides, no opinion from all is a denial. This is the API the
    SelfSubjectAccessReview uses: `await authorizer.authorize(attrs)`."""

    def __init__(self, registry: Registry) -> None:
        self.node = NodeAuthorizer(registry)
        self.rbac = RbacAuthorizer(registry)

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        if MASTERS_GROUP in attrs.user.groups:
            return AuthorizationResult(Decision.ALLOW, "system:masters")
        for authorizer in (self.node, self.rbac):
            result = await authorizer.authorize(attrs)
            if result.decision is not Decision.NO_OPINION:
                return result
        return AuthorizationResult(Decision.DENY)

    async def rules_for(self, user: UserInfo, namespace: str) -> Obj:
        """What `user` may do in `namespace` as a SubjectRulesReviewStatus (`kubectl auth
        can-i --list`): the union of the chain's answers, as kube-apiserver's. system:masters
        may do everything; the Node authorizer cannot enumerate a kubelet's rights, so a
        node's list is incomplete; RBAC lists each rule of the user's bindings."""
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        errors: list[str] = []
        if MASTERS_GROUP in user.groups:
            resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            non_resource_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        if node_identity(user) is not None:
            errors.append("node authorizer does not support user rule resolution")
        for rule in await self.rbac.rules_for(user, namespace):
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
                continue
            entry: Obj = {key: list(rule.get(key) or [])
                          for key in ("verbs", "apiGroups", "resources")}
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(entry)
        status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                       "incomplete": bool(errors)}
        if errors:
            status["evaluationError"] = ", ".join(errors)
        return status

    async def check(self, attrs: Attributes) -> None:
        """Raise Kubernetes' 403 unless `attrs` is allowed."""
        result = await self.authorize(attrs)
        if not result.allowed:
            raise forbidden(attrs, result.reason)
