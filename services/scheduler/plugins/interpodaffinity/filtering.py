"""InterPodAffinity PreFilter/Filter (Kubernetes' interpodaffinity/filtering.go).

PreFilter counts, per topology pair (key, value):
- `existing_anti_affinity_counts`: existing pods whose required anti-affinity terms
  match the incoming pod (symmetry: an existing pod's anti-affinity repels newcomers),
- `affinity_counts`: existing pods matching *all* the incoming pod's required affinity
  terms, counted for each term's key,
- `anti_affinity_counts`: existing pods matching each required anti-affinity term.
Filter then rejects a node whose value of a key is counted: affinity not met (or the key
missing) → UnschedulableAndUnresolvable; anti-affinity or an existing pod's → Unschedulable.
The first pod of a group with affinity to itself may go anywhere with the keys.
AddPod/RemovePod keep the counts right for preemption's dry runs and nominated pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    Status,
    unresolvable,
    unschedulable,
)
from skiff.scheduler.plugins.interpodaffinity.common import (
    NamespaceLister,
    merge_namespaces,
    namespace_labels,
)
from skiff.scheduler.podinfo import AffinityTerms, PodInfo

PRE_FILTER_STATE_KEY = "PreFilterInterPodAffinity"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules")
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

TopologyPair = tuple[str, str]
Counts = dict[TopologyPair, int]


def _update(counts: Counts, labels: Mapping[str, str], key: str, delta: int) -> None:
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    left = counts.get(pair, 0) + delta
    if left:
        counts[pair] = left
    else:
        counts.pop(pair, None)  # deltas may be negative: drop pairs back at zero


def pod_matches_all_terms(terms: AffinityTerms, pod: PodInfo) -> bool:
    """The incoming pod's namespaceSelectors are merged into names: no labels needed."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def update_with_affinity_terms(counts: Counts, terms: AffinityTerms, pod: PodInfo,
                               labels: Mapping[str, str], delta: int) -> None:
    if pod_matches_all_terms(terms, pod):
        for t in terms:
            _update(counts, labels, t.topology_key, delta)


def update_with_anti_affinity_terms(counts: Counts, terms: AffinityTerms, pod: PodInfo,
                                    ns_labels: Mapping[str, str] | None,
                                    labels: Mapping[str, str], delta: int) -> None:
    for t in terms:
        if t.matches(pod, ns_labels):
            _update(counts, labels, t.topology_key, delta)


@dataclass
class PreFilterState:
    pod: PodInfo
    required_affinity_terms: AffinityTerms = ()
    required_anti_affinity_terms: AffinityTerms = ()
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    existing_anti_affinity_counts: Counts = field(default_factory=dict)
    affinity_counts: Counts = field(default_factory=dict)
    anti_affinity_counts: Counts = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return PreFilterState(self.pod, self.required_affinity_terms,
                              self.required_anti_affinity_terms, self.namespace_labels,
                              dict(self.existing_anti_affinity_counts),
                              dict(self.affinity_counts), dict(self.anti_affinity_counts))

    def update_with_pod(self, other: PodInfo, labels: Mapping[str, str], delta: int) -> None:
        update_with_anti_affinity_terms(self.existing_anti_affinity_counts,
                                        other.required_anti_affinity_terms, self.pod,
                                        self.namespace_labels, labels, delta)
        update_with_affinity_terms(self.affinity_counts, self.required_affinity_terms,
                                   other, labels, delta)
        update_with_anti_affinity_terms(self.anti_affinity_counts,
                                        self.required_anti_affinity_terms, other, None,
                                        labels, delta)


def compute_pre_filter_state(pod: PodInfo, nodes: Sequence[NodeInfo],
                             namespaces: NamespaceLister | None, *,
                             any_required_anti_affinity: bool = True) -> PreFilterState:
    s = PreFilterState(
        pod, merge_namespaces(pod.required_affinity_terms, namespaces),
        merge_namespaces(pod.required_anti_affinity_terms, namespaces),
        namespace_labels(namespaces, pod.namespace))
    incoming = bool(s.required_affinity_terms or s.required_anti_affinity_terms)
    if not incoming and not any_required_anti_affinity:
        return s
    for node in nodes:
        labels = node.labels
        if any_required_anti_affinity:
            for existing in node.pods_with_required_anti_affinity:
                update_with_anti_affinity_terms(
                    s.existing_anti_affinity_counts, existing.required_anti_affinity_terms,
                    pod, s.namespace_labels, labels, 1)
        if incoming:
            for existing in node.pods:
                update_with_affinity_terms(s.affinity_counts, s.required_affinity_terms,
                                           existing, labels, 1)
                update_with_anti_affinity_terms(
                    s.anti_affinity_counts, s.required_anti_affinity_terms, existing, None,
                    labels, 1)
    return s


def satisfy_existing_pods_anti_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    counts = s.existing_anti_affinity_counts
    if counts:
        for pair in labels.items():
            if counts.get(pair, 0) > 0:
                return False
    return True


def satisfy_pod_anti_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    counts = s.anti_affinity_counts
    if counts:
        for t in s.required_anti_affinity_terms:
            value = labels.get(t.topology_key)
            if value is not None and counts.get((t.topology_key, value), 0) > 0:
                return False
    return True


def satisfy_pod_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    for t in s.required_affinity_terms:
        value = labels.get(t.topology_key)
        if value is None:
            return False  # every term's topology key must be on the node
        if s.affinity_counts.get((t.topology_key, value), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    # The first pod of a group with affinity to itself: no pod anywhere matches the
    # terms yet, and the pod matches them itself — let it start the group.
    return not s.affinity_counts and pod_matches_all_terms(s.required_affinity_terms, s.pod)


class AffinityFiltering:
    """Mixed into `InterPodAffinity`, which provides `cache` and `namespaces`."""

    name = "InterPodAffinity"
    cache: Cache
    namespaces: NamespaceLister | None

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        any_anti = self.cache.pods_with_required_anti_affinity > 0
        if not any_anti and not (pod.required_affinity_terms
                                 or pod.required_anti_affinity_terms):
            return SKIP
        s = compute_pre_filter_state(pod, self.cache.node_infos(), self.namespaces,
                                     any_required_anti_affinity=any_anti)
        if (not s.existing_anti_affinity_counts and not s.required_affinity_terms
                and not s.required_anti_affinity_terms):
            return SKIP
        state.write(PRE_FILTER_STATE_KEY, s)
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                node: NodeInfo) -> None:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.update_with_pod(pod_to_add, node.labels, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> None:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.update_with_pod(pod_to_remove, node.labels, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return SUCCESS
        labels = node.labels
        if not satisfy_pod_affinity(s, labels):
            return unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
        if not satisfy_pod_anti_affinity(s, labels):
            return unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if not satisfy_existing_pods_anti_affinity(s, labels):
            return unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return SUCCESS
