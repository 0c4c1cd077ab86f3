"""PodTopologySpread PreScore/Score/NormalizeScore (SPEC TS3).

Each ScheduleAnyway constraint gets weight ln(size + 2), size being its number of domains
among the filtered nodes (for `kubernetes.io/hostname`, the filtered nodes minus the
ignored ones). A node scores Σ count × weight + (maxSkew − 1), where count is the matching
pods in its domain over all nodes; nodes missing a key (when every key is required) are
ignored and score 0; the sum is rounded half away from zero (Kubernetes 1.32).
Normalize maps s to 100 × (max + min − s) / max, so the emptiest domain scores highest;
100 for every node when max = 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from skiff.api.wellknown import LABEL_HOSTNAME
from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    CycleState,
    NodeScore,
    Status,
)
from skiff.scheduler.plugins.helpers import normalize_in_place
from skiff.scheduler.plugins.podtopologyspread.common import (
    SCHEDULE_ANYWAY,
    Constraint,
    node_has_all_keys,
)
from skiff.scheduler.podinfo import PodInfo

PRE_SCORE_STATE_KEY = "PreScorePodTopologySpread"


def topology_normalizing_weight(size: int) -> float:
    return math.log(size + 2)


def round_half_away_from_zero(x: float) -> int:
    """Go's `math.Round`: halves go away from zero (Python's `round` goes to even)."""
    whole = math.floor(abs(x))
    if abs(x) - whole >= 0.5:
        whole += 1
    return int(math.copysign(whole, x))


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    return count * weight + (max_skew - 1)


@dataclass
class PreScoreState:
    constraints: list[Constraint] = field(default_factory=list)
    ignored_nodes: set[str] = field(default_factory=set)
    topology_pair_to_pod_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    topology_normalizing_weight: list[float] = field(default_factory=list)

    def clone(self) -> PreScoreState:
        return self  # read-only after PreScore


class SpreadScoring:
    """Mixed into `PodTopologySpread`."""

    name = "PodTopologySpread"

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        raise NotImplementedError

    def _all_nodes(self) -> list[NodeInfo]:
        raise NotImplementedError

    def _system_defaulted(self) -> bool:
        raise NotImplementedError

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        all_nodes = self._all_nodes()
        if not nodes or not all_nodes:
            state.skip_score.add(self.name)
            return SUCCESS
        s = PreScoreState(constraints=self._constraints(pod, SCHEDULE_ANYWAY))
        if not s.constraints:
            state.skip_score.add(self.name)
            return SUCCESS
        require_all = bool(pod.spread_constraints) or not self._system_defaulted()
        sizes = [0] * len(s.constraints)
        for node in nodes:
            labels = node.labels
            if require_all and not node_has_all_keys(labels, s.constraints):
                s.ignored_nodes.add(node.name)
                continue
            for i, c in enumerate(s.constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue
                pair = (c.topology_key, labels.get(c.topology_key, ""))
                if pair not in s.topology_pair_to_pod_counts:
                    s.topology_pair_to_pod_counts[pair] = 0
                    sizes[i] += 1
        for i, c in enumerate(s.constraints):
            size = sizes[i]
            if c.topology_key == LABEL_HOSTNAME:
                size = len(nodes) - len(s.ignored_nodes)
            s.topology_normalizing_weight.append(topology_normalizing_weight(size))
        counts = s.topology_pair_to_pod_counts
        for node in all_nodes:
            facts = node.facts
            if facts is None:
                continue
            if require_all and not node_has_all_keys(facts.labels, s.constraints):
                continue
            for c in s.constraints:
                value = facts.labels.get(c.topology_key)
                if value is None or c.topology_key == LABEL_HOSTNAME:
                    continue
                pair = (c.topology_key, value)
                if pair not in counts:
                    continue
                if not c.matches_node_inclusion_policies(pod, facts):
                    continue
                counts[pair] += c.count_matching(node, pod.namespace)
        state.write(PRE_SCORE_STATE_KEY, s)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is None or node.name in s.ignored_nodes:
            return 0
        labels = node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = c.count_matching(node, pod.namespace)
            else:
                count = s.topology_pair_to_pod_counts.get((c.topology_key, value), 0)
            total += score_for_count(count, c.max_skew, s.topology_normalizing_weight[i])
        # Kubernetes 1.32 `int64(math.Round(score))` (older docs quote a truncation).
        return round_half_away_from_zero(total)

    def normalize_raw(self, state: CycleState, pod: PodInfo, names: Sequence[str],
                      raw: list[int]) -> list[int]:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is None:
            return raw
        ignored = s.ignored_nodes
        if ignored:
            counted = [x for name, x in zip(names, raw, strict=True) if name not in ignored]
        else:
            counted = raw
        lowest = min(counted, default=0)
        highest = max(counted, default=0)
        if highest == 0:
            out = [MAX_NODE_SCORE] * len(raw)
        else:
            top = highest + lowest
            out = [MAX_NODE_SCORE * (top - x) // highest for x in raw]
        if ignored:
            out = [0 if name in ignored else x for name, x in zip(names, out, strict=True)]
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: list[NodeScore]) -> None:
        normalize_in_place(self, state, pod, scores)
