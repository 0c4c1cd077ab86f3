"""PodTopologySpread PreFilter/Filter (SPEC TS1–TS2).

PreFilter counts, for every DoNotSchedule constraint, the matching pods of each topology
domain over the nodes that pass the pod's node inclusion policies and carry every
constraint's key (`tp_pair_to_match_num`), and keeps the two least-loaded domains per key
(`tp_key_to_critical_paths`, Kubernetes' criticalPaths). Filter then checks
`matches in the node's domain + self-match − global minimum ≤ maxSkew` per constraint.
AddPod/RemovePod keep the counts right while preemption tries removing victims.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    Status,
    unresolvable,
    unschedulable,
)
from skiff.scheduler.plugins.helpers import required_node_matcher
from skiff.scheduler.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    HONOR,
    Constraint,
    node_has_all_keys,
)
from skiff.scheduler.podinfo import PodInfo

PRE_FILTER_STATE_KEY = "PreFilterPodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = (ERR_REASON_CONSTRAINTS_NOT_MATCH
                                   + " (missing required label)")
MAX_INT32 = 2**31 - 1

TopologyPair = tuple[str, str]


@dataclass
class CriticalPaths:
    """The two domains with the fewest matches; `paths[0]` always holds the minimum."""

    paths: list[tuple[str, int]] = field(
        default_factory=lambda: [("", MAX_INT32), ("", MAX_INT32)])

    def update(self, value: str, num: int) -> None:
        p = self.paths
        i = 0 if value == p[0][0] else 1 if value == p[1][0] else -1
        if i >= 0:
            p[i] = (value, num)
            if p[0][1] > p[1][1]:
                p[0], p[1] = p[1], p[0]
        elif num < p[0][1]:
            p[1] = p[0]
            p[0] = (value, num)
        elif num < p[1][1]:
            p[1] = (value, num)

    def as_list(self) -> list[tuple[str, int]]:
        return list(self.paths)


@dataclass
class PreFilterState:
    constraints: list[Constraint] = field(default_factory=list)
    tp_key_to_critical_paths: dict[str, CriticalPaths] = field(default_factory=dict)
    tp_key_to_domains_num: dict[str, int] = field(default_factory=dict)
    tp_pair_to_match_num: dict[TopologyPair, int] = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            {k: CriticalPaths(list(v.paths)) for k, v in self.tp_key_to_critical_paths.items()},
            dict(self.tp_key_to_domains_num), dict(self.tp_pair_to_match_num))

    def min_match_num(self, constraint: Constraint) -> int:
        paths = self.tp_key_to_critical_paths.get(constraint.topology_key)
        if paths is None:
            return 0
        if self.tp_key_to_domains_num.get(constraint.topology_key, 0) < constraint.min_domains:
            return 0  # fewer eligible domains than minDomains: the global minimum is 0
        return paths.paths[0][1]


def compute_pre_filter_state(pod: PodInfo, constraints: list[Constraint],
                             all_nodes: list[NodeInfo]) -> PreFilterState:
    state = PreFilterState(constraints=constraints)
    if not constraints:
        return state
    counts = state.tp_pair_to_match_num
    for node in all_nodes:
        facts = node.facts
        if facts is None or not node_has_all_keys(facts.labels, constraints):
            continue
        for c in constraints:
            if not c.matches_node_inclusion_policies(pod, facts):
                continue
            pair = (c.topology_key, facts.labels[c.topology_key])
            counts[pair] = counts.get(pair, 0) + c.count_matching(node, pod.namespace)
    return with_critical_paths(state)


def compute_pre_filter_state_from_domains(pod: PodInfo, constraints: list[Constraint],
                                          cache: Cache) -> PreFilterState | None:
    """The same counts from the cache's per-domain index, without visiting nodes — or None
    when some node might be left out of the counting (the pod's node affinity or taints
    policy is honored, or a node lacks one of several keys): then nodes must be scanned."""
    if not constraints:
        return None
    for c in constraints:
        if c.node_taints_policy == HONOR:
            return None
        if c.node_affinity_policy == HONOR and required_node_matcher(pod) is not None:
            return None
    keys = {c.topology_key for c in constraints}
    if len(keys) > 1:
        total = len(cache.node_infos())
        if any(cache.nodes_with_label(key) != total for key in keys):
            return None
    state = PreFilterState(constraints=constraints)
    counts = state.tp_pair_to_match_num
    namespace = pod.namespace
    for c in constraints:
        key = c.topology_key
        counts_none = c.selector.empty  # countPodsMatchSelector: an empty selector counts 0
        for value, domain in cache.topology_domains(key).items():
            pair = (key, value)
            num = counts.get(pair, 0)
            if counts_none:
                counts[pair] = num
                continue
            for (ns, label_set), n in domain.label_sets.items():
                if ns == namespace and c.matches_labels(label_set):
                    num += n
            counts[pair] = num
    return with_critical_paths(state)


def with_critical_paths(state: PreFilterState) -> PreFilterState:
    """Fill in the two least-loaded domains and the number of domains per key."""
    counts = state.tp_pair_to_match_num
    for c in state.constraints:
        state.tp_key_to_critical_paths[c.topology_key] = CriticalPaths()
    for (key, value), num in counts.items():
        state.tp_key_to_critical_paths[key].update(value, num)
        state.tp_key_to_domains_num[key] = state.tp_key_to_domains_num.get(key, 0) + 1
    return state


class SpreadFiltering:
    """Mixed into `PodTopologySpread`, which provides `_constraints`, `_all_nodes` and
    `cache`."""

    name = "PodTopologySpread"
    cache: Cache

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        raise NotImplementedError

    def _all_nodes(self) -> list[NodeInfo]:
        raise NotImplementedError

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        s = (compute_pre_filter_state_from_domains(pod, constraints, self.cache)
             or compute_pre_filter_state(pod, constraints, self._all_nodes()))
        state.write(PRE_FILTER_STATE_KEY, s)
        if not constraints:
            state.skip_filter.add(self.name)
        return SUCCESS

    def _update_with_pod(self, state: CycleState, pod: PodInfo, other: PodInfo,
                         node: NodeInfo, delta: int) -> None:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        facts = node.facts
        if s is None or facts is None or other.namespace != pod.namespace:
            return
        if not node_has_all_keys(facts.labels, s.constraints):
            return
        for c in s.constraints:
            if not c.matches_labels(other.label_set):
                continue
            if not c.matches_node_inclusion_policies(pod, facts):
                continue
            pair = (c.topology_key, facts.labels[c.topology_key])
            s.tp_pair_to_match_num[pair] = s.tp_pair_to_match_num.get(pair, 0) + delta
            s.tp_key_to_critical_paths[c.topology_key].update(
                pair[1], s.tp_pair_to_match_num[pair])

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                node: NodeInfo) -> None:
        self._update_with_pod(state, pod, pod_to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> None:
        self._update_with_pod(state, pod, pod_to_remove, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None or not s.constraints:
            return SUCCESS
        labels = node.labels
        for c in s.constraints:
            value = labels.get(c.topology_key)
            if value is None:
                return unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
            self_match = 1 if c.matches_labels(pod.label_set) else 0
            match_num = s.tp_pair_to_match_num.get((c.topology_key, value), 0)
            skew = match_num + self_match - s.min_match_num(c)
            if skew > c.max_skew:
                return unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
        return SUCCESS
