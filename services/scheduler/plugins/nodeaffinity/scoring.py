"""NodeAffinity Score: the sum of the weights of the preferred terms a node matches,
normalized so the best node gets 100."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import SKIP, SUCCESS, CycleState, NodeScore, Status
from skiff.scheduler.plugins.helpers import (
    NodeMatcher,
    compile_term,
    default_normalize_raw,
    normalize_in_place,
)
from skiff.scheduler.podinfo import PodInfo

_KEY = "PreScoreNodeAffinity"


@dataclass
class _PreScoreState:
    preferred: list[tuple[int, NodeMatcher]]

    def clone(self) -> _PreScoreState:
        return self


class NodeAffinityScore:
    name = "NodeAffinity"

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        node_affinity = (pod.affinity or {}).get("nodeAffinity") or {}
        terms = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [(int(t.get("weight", 0)), compile_term(t.get("preference") or {}))
                     for t in terms if int(t.get("weight", 0)) != 0]
        if not preferred:
            return SKIP  # every node would score 0 (Kubernetes skips Score too)
        state.write(_KEY, _PreScoreState(preferred))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: _PreScoreState | None = state.read(_KEY)
        if s is None or not s.preferred or node.facts is None:
            return 0
        facts = node.facts
        return sum(weight for weight, matches in s.preferred if matches(facts))

    def normalize_raw(self, state: CycleState, pod: PodInfo, names: Sequence[str],
                      raw: list[int]) -> list[int]:
        return default_normalize_raw(raw, reverse=False)

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: list[NodeScore]) -> None:
        normalize_in_place(self, state, pod, scores)
