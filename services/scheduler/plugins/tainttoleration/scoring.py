"""TaintToleration Score: fewer intolerable PreferNoSchedule taints is better
(count, then normalized in reverse so the cleanest node gets 100)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import SUCCESS, CycleState, NodeScore, Status
from skiff.scheduler.plugins.helpers import (
    default_normalize_raw,
    normalize_in_place,
    tolerates,
)
from skiff.scheduler.podinfo import PodInfo

_KEY = "PreScoreTaintToleration"


@dataclass
class _PreScoreState:
    tolerations: tuple[Mapping[str, Any], ...]

    def clone(self) -> _PreScoreState:
        return self


class TaintTolerationScore:
    name = "TaintToleration"

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        prefer = tuple(t for t in pod.tolerations
                       if (t.get("effect") or "") in ("", "PreferNoSchedule"))
        state.write(_KEY, _PreScoreState(prefer))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: _PreScoreState | None = state.read(_KEY)
        tolerations = s.tolerations if s is not None else ()
        if node.facts is None or not node.facts.taints:
            return 0
        return sum(1 for taint in node.facts.taints if taint.effect == "PreferNoSchedule"
                   and not any(tolerates(t, taint) for t in tolerations))

    def normalize_raw(self, state: CycleState, pod: PodInfo, names: Sequence[str],
                      raw: list[int]) -> list[int]:
        return default_normalize_raw(raw, reverse=True)

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: list[NodeScore]) -> None:
        normalize_in_place(self, state, pod, scores)
