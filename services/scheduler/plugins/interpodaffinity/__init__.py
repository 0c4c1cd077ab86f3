"""InterPodAffinity: pod affinity and anti-affinity, required (Filter) and preferred
(Score), including existing pods' anti-affinity towards newcomers (symmetry) and
namespaces / namespaceSelector. Kubernetes' default weight 2."""

from __future__ import annotations

from skiff.scheduler.cache import Cache
from skiff.scheduler.framework.interface import ClusterEvent
from skiff.scheduler.plugins.interpodaffinity.common import (
    InterPodAffinityArgs,
    NamespaceLister,
    merge_namespaces,
)
from skiff.scheduler.plugins.interpodaffinity.filtering import (
    AffinityFiltering,
    pod_matches_all_terms,
)
from skiff.scheduler.plugins.interpodaffinity.scoring import AffinityScoring
from skiff.scheduler.podinfo import PodInfo


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

    def is_schedulable_after_pod_change(self, pod: PodInfo, old: PodInfo | None,
                                        new: PodInfo | None) -> bool:
        """Kubernetes' `isSchedulableAfterPodChange`: an assigned pod that now matches
        all of the pod's required affinity terms (added, or relabelled into a match), or
        no longer matches its anti-affinity terms (relabelled out, or deleted) may help;
        so may the deletion of a pod with required anti-affinity (symmetry). Changes of
        unassigned pods and anything else leave the pod waiting."""
        if (new is not None and not new.node_name) or (old is not None and not old.node_name):
            return False
        affinity = merge_namespaces(pod.required_affinity_terms, self.namespaces)
        anti = merge_namespaces(pod.required_anti_affinity_terms, self.namespaces)
        if old is not None and new is not None:
            return ((not pod_matches_all_terms(affinity, old)
                     and pod_matches_all_terms(affinity, new))
                    or (pod_matches_all_terms(anti, old)
                        and not pod_matches_all_terms(anti, new)))
        if new is not None:
            return pod_matches_all_terms(affinity, new)
        assert old is not None
        # Deleted. Wider than Kubernetes 1.32 (anti-affinity only): a matching pod's
        # deletion can also let the first pod of a self-affine group start anew.
        return (bool(old.required_anti_affinity_terms)
                or any(t.matches(old, None) for t in anti)
                or pod_matches_all_terms(affinity, old))


__all__ = ["InterPodAffinity", "InterPodAffinityArgs", "NamespaceLister"]
