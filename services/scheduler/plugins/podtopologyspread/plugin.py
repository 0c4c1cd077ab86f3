"""The PodTopologySpread plugin: filtering and scoring over the scheduler's cache, with
the configured default constraints (TS4)."""

from __future__ import annotations

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import ClusterEvent
from skiff.scheduler.plugins.podtopologyspread.common import (
    Constraint,
    OwnerLister,
    PodTopologySpreadArgs,
    pod_constraints,
)
from skiff.scheduler.plugins.podtopologyspread.filtering import SpreadFiltering
from skiff.scheduler.plugins.podtopologyspread.scoring import SpreadScoring
from skiff.scheduler.podinfo import PodInfo


class PodTopologySpread(SpreadFiltering, SpreadScoring):
    name = "PodTopologySpread"

    def __init__(self, *, cache: Cache, args: PodTopologySpreadArgs | None = None,
                 owners: OwnerLister | None = None) -> None:
        self.cache = cache
        self.args = args or PodTopologySpreadArgs()
        self.owners = owners

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE,
                          ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_UPDATE,
                          ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.OWNER_CHANGE})

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        return pod_constraints(pod, action, self.args, self.owners)

    def _all_nodes(self) -> list[NodeInfo]:
        return self.cache.node_infos()

    def _system_defaulted(self) -> bool:
        return self.args.system_defaulted
