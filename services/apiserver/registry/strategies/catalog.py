"""The strategy of every kind: the table the generic store looks a kind's strategy up in.
A kind not listed gets the generic `Strategy`; a new kind with rules of its own (or,
later, a custom resource) is a strategy module plus an entry here.
"""

from __future__ import annotations

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
        self._by_kind: dict[str, Strategy] = {
            "Pod": self.pods,
            "Service": self.services,
            **{kind: ControllerOwnedStatus(kind) for kind in CONTROLLER_OWNED_STATUS},
            **{kind: RbacStrategy(kind, self.rbac) for kind in RBAC_KINDS},
        }

    def __getitem__(self, kind: str) -> Strategy:
        strategy = self._by_kind.get(kind)
        if strategy is None:
            strategy = self._by_kind[kind] = Strategy(kind)
        return strategy
