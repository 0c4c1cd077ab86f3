"""InterPodAffinity: pod affinity and anti-affinity, required (Filter) and preferred
(Score), including existing pods' anti-affinity towards newcomers (symmetry) and
namespaces / namespaceSelector. Kubernetes' default weight 2."""

from __future__ import annotations

from skiff.scheduler.cache import Cache
from skiff.scheduler.framework.interface import ClusterEvent
from skiff.scheduler.plugins.interpodaffinity.common import (
    InterPodAffinityArgs,
    NamespaceLister,
)
from skiff.scheduler.plugins.interpodaffinity.filtering import AffinityFiltering
from skiff.scheduler.plugins.interpodaffinity.scoring import AffinityScoring


class InterPodAffinity(AffinityFiltering, AffinityScoring):
    name = "InterPodAffinity"

    def __init__(self, *, cache: Cache, namespaces: NamespaceLister | None = None,
                 args: InterPodAffinityArgs | None = None) -> None:
        self.cache = cache
        self.namespaces = namespaces
        self.args = args or InterPodAffinityArgs()

    def events_to_register(self) -> frozenset[ClusterEvent]:
        """A pod that (mis)matches a term arrives, changes labels or leaves; a node
        arrives or is relabelled (topology keys); a namespace's labels change."""
        return frozenset({ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_UPDATE,
                          ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.NODE_ADD,
                          ClusterEvent.NODE_UPDATE, ClusterEvent.NAMESPACE_CHANGE})


__all__ = ["InterPodAffinity", "InterPodAffinityArgs", "NamespaceLister"]
