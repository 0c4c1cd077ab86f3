"""InterPodAffinity PreScore/Score/NormalizeScore (Kubernetes' interpodaffinity/scoring.go).

PreScore sums, per topology pair, the weights of preferred terms that existing pods
match: + for the incoming pod's preferred affinity, − for its preferred anti-affinity,
and symmetrically the existing pods' terms the incoming pod matches (their required
affinity counts `hardPodAffinityWeight`, their preferred terms their weight). A node
scores the sum over its labels' pairs; NormalizeScore maps [min, max] onto [0, 100].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    NodeScore,
    Status,
)
from skiff.scheduler.plugins.helpers import normalize_in_place
from skiff.scheduler.plugins.interpodaffinity.common import (
    InterPodAffinityArgs,
    NamespaceLister,
    merge_namespaces,
    namespace_labels,
)
from skiff.scheduler.podinfo import AffinityTerm, AffinityTerms, PodInfo

PRE_SCORE_STATE_KEY = "PreScoreInterPodAffinity"

# topology key → value → score
ScoreMap = dict[str, dict[str, int]]


def _process_term(scores: ScoreMap, term: AffinityTerm, weight: int, pod: PodInfo,
                  ns_labels: Mapping[str, str] | None, node_labels: Mapping[str, str],
                  multiplier: int) -> None:
    if term.matches(pod, ns_labels):
        value = node_labels.get(term.topology_key)
        if value is not None:
            by_value = scores.setdefault(term.topology_key, {})
            by_value[value] = by_value.get(value, 0) + weight * multiplier


def _process_terms(scores: ScoreMap, terms: AffinityTerms, pod: PodInfo,
                   ns_labels: Mapping[str, str] | None, node_labels: Mapping[str, str],
                   multiplier: int) -> None:
    for term in terms:
        _process_term(scores, term, term.weight, pod, ns_labels, node_labels, multiplier)


@dataclass
class PreScoreState:
    topology_score: ScoreMap = field(default_factory=dict)

    def clone(self) -> PreScoreState:
        return self  # read-only after PreScore


class AffinityScoring:
    """Mixed into `InterPodAffinity`, which provides `cache`, `namespaces` and `args`."""

    name = "InterPodAffinity"
    cache: Cache
    namespaces: NamespaceLister | None
    args: InterPodAffinityArgs

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        if not nodes:
            return SKIP
        has_constraints = bool(pod.preferred_affinity_terms
                               or pod.preferred_anti_affinity_terms)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        if not has_constraints and self.cache.pods_with_affinity == 0:
            return SKIP
        preferred_affinity = merge_namespaces(pod.preferred_affinity_terms, self.namespaces)
        preferred_anti = merge_namespaces(pod.preferred_anti_affinity_terms, self.namespaces)
        ns_labels = namespace_labels(self.namespaces, pod.namespace)
        hard_weight = self.args.hard_pod_affinity_weight
        scores: ScoreMap = {}
        for node in self.cache.node_infos():
            labels = node.labels
            if not labels:
                continue
            # Without preferred terms of its own only pods with affinity can matter.
            for existing in node.pods if has_constraints else node.pods_with_affinity:
                _process_terms(scores, preferred_affinity, existing, None, labels, 1)
                _process_terms(scores, preferred_anti, existing, None, labels, -1)
                if hard_weight > 0:
                    for term in existing.required_affinity_terms:
                        _process_term(scores, term, hard_weight, pod, ns_labels, labels, 1)
                _process_terms(scores, existing.preferred_affinity_terms, pod, ns_labels,
                               labels, 1)
                _process_terms(scores, existing.preferred_anti_affinity_terms, pod,
                               ns_labels, labels, -1)
        if not scores:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(scores))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is None:
            return 0
        labels = node.labels
        total = 0
        for key, by_value in s.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def normalize_raw(self, state: CycleState, pod: PodInfo, names: Sequence[str],
                      raw: list[int]) -> list[int]:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is None or not s.topology_score or not raw:
            return raw
        lowest = min(raw)
        spread = max(raw) - lowest
        if spread <= 0:
            return [0] * len(raw)
        return [int(MAX_NODE_SCORE * ((x - lowest) / spread)) for x in raw]

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: list[NodeScore]) -> None:
        normalize_in_place(self, state, pod, scores)
