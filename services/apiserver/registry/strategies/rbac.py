"""The RBAC kinds' strategy (Kubernetes' `pkg/registry/rbac/*/policybased` storage): a write
of a Role, ClusterRole, RoleBinding or ClusterRoleBinding is refused when it would grant
more than the writer holds, unless the writer may `escalate` or `bind` (SPEC AU6). The
check runs before admission, as Kubernetes' policy-based storage checks before its store;
the apiserver gives it the authorizer (none in the insecure mode: nothing is checked).
"""

from __future__ import annotations

from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.auth.escalation import EscalationCheck
from skiff.apiserver.registry.strategy import Strategy

KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


class RbacPolicy:
    """The escalation check the four RBAC strategies share (set by the apiserver)."""

    def __init__(self) -> None:
        self.escalation: EscalationCheck | None = None


class RbacStrategy(Strategy):
    """Roles, ClusterRoles and their bindings."""

    def __init__(self, kind: str, policy: RbacPolicy) -> None:
        super().__init__(kind)
        self.policy = policy

    async def before_write(self, info: KindInfo, obj: Obj, old: Obj | None, *,
                           request_name: str | None) -> None:
        if self.policy.escalation is not None:
            await self.policy.escalation.admit(info, obj, old, request_name=request_name)
