"""The strategy of every kind: the table the generic store looks a kind's strategy up in.
A kind not listed gets the generic `Strategy`; a new kind with rules of its own is a
strategy module plus an entry here. Custom resources get theirs from the apiserver's CRD
controller while their CustomResourceDefinition is served (`set_custom`).
"""

from __future__ import annotations

from skiff.api import ApiError
from skiff.api.kinds import KindInfo
from skiff.apiserver.registry.strategies.crd import CrdStrategy
from skiff.apiserver.registry.strategies.csr import CsrPolicy, CsrStrategy
from skiff.apiserver.registry.strategies.pod import PodStrategy
from skiff.apiserver.registry.strategies.rbac import KINDS as RBAC_KINDS
from skiff.apiserver.registry.strategies.rbac import RbacPolicy, RbacStrategy
from skiff.apiserver.registry.strategies.service import ServiceStrategy
from skiff.apiserver.registry.strategies.status import KINDS as CONTROLLER_OWNED_STATUS
from skiff.apiserver.registry.strategies.status import ControllerOwnedStatus
from skiff.apiserver.registry.strategy import Strategy


class Strategies:
    """kind → its strategy (one instance per kind, shared by every request)."""

    def __init__(self) -> None:
        self.pods = PodStrategy("Pod")
        self.services = ServiceStrategy("Service")
        self.rbac = RbacPolicy()
        self.csr = CsrPolicy(self.rbac)
        self._by_kind: dict[str, Strategy] = {
            "Pod": self.pods,
            "Service": self.services,
            "CustomResourceDefinition": CrdStrategy("CustomResourceDefinition"),
            "CertificateSigningRequest": CsrStrategy("CertificateSigningRequest", self.csr),
            **{kind: ControllerOwnedStatus(kind) for kind in CONTROLLER_OWNED_STATUS},
            **{kind: RbacStrategy(kind, self.rbac) for kind in RBAC_KINDS},
        }
        self._custom: dict[str, Strategy] = {}  # by KindInfo.ref

    def of(self, info: KindInfo) -> Strategy:
        """The strategy of the kind `info` names (a custom resource's while served)."""
        if info.custom:
            strategy = self._custom.get(info.ref)
            if strategy is None:
                raise ApiError.not_found(info.resource, "", group=info.group)
            return strategy
        return self[info.kind]

    def set_custom(self, info: KindInfo, strategy: Strategy | None) -> None:
        """Serve a custom resource with `strategy`, or (None) no longer."""
        if strategy is None:
            self._custom.pop(info.ref, None)
        else:
            self._custom[info.ref] = strategy

    def __getitem__(self, kind: str) -> Strategy:
        strategy = self._by_kind.get(kind)
        if strategy is None:
            strategy = self._by_kind[kind] = Strategy(kind)
        return strategy
