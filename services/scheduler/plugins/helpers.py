"""Matching rules several plugins share: tolerations against taints (`v1helper`),
node selectors and node affinity terms (`component-helpers/scheduling/corev1`), and
Kubernetes' default score normalization.

Matchers are compiled once per pod version and kept on `PodInfo.extra`, so filtering
thousands of nodes does not re-read the pod's dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from skiff.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    CycleState,
    NodeScore,
    RawScoreNormalizer,
)
from skiff.scheduler.podinfo import NodeFacts, PodInfo, Taint

NodeMatcher = Callable[[NodeFacts], bool]


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """`Toleration.ToleratesTaint`: effect, key (empty + Exists = any key), value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == taint.value


def find_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]],
                           effects: tuple[str, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _requirement(expr: Mapping[str, Any], *, field: bool) -> NodeMatcher:
    key = str(expr.get("key", ""))
    op = str(expr.get("operator", ""))
    values = [str(v) for v in expr.get("values") or []]
    wanted = frozenset(values)

    def value_of(node: NodeFacts) -> str | None:
        if field:
            return node.name if key == "metadata.name" else None
        return node.labels.get(key)

    if op == "In":
        return lambda n: value_of(n) in wanted
    if op == "NotIn":
        return lambda n: value_of(n) not in wanted
    if op == "Exists":
        return lambda n: value_of(n) is not None
    if op == "DoesNotExist":
        return lambda n: value_of(n) is None
    if op in ("Gt", "Lt") and len(values) == 1:
        try:
            bound = int(values[0])
        except ValueError:
            return lambda n: False

        def compare(n: NodeFacts) -> bool:
            raw = value_of(n)
            try:
                number = int(raw) if raw is not None else None
            except ValueError:
                return False
            if number is None:
                return False
            return number > bound if op == "Gt" else number < bound
        return compare
    return lambda n: False


def compile_term(term: Mapping[str, Any]) -> NodeMatcher:
    """A NodeSelectorTerm: all its requirements hold. An empty term matches no node."""
    parts = ([_requirement(e, field=False) for e in term.get("matchExpressions") or []]
             + [_requirement(e, field=True) for e in term.get("matchFields") or []])
    if not parts:
        return lambda n: False
    return lambda n: all(p(n) for p in parts)


def _compile_required(pod: PodInfo) -> NodeMatcher | None:
    checks: list[NodeMatcher] = []
    if pod.node_selector:
        wanted = dict(pod.node_selector)
        checks.append(lambda n: all(n.labels.get(k) == v for k, v in wanted.items()))
    node_affinity = (pod.affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = [compile_term(t) for t in required.get("nodeSelectorTerms") or []]
        checks.append(lambda n: any(t(n) for t in terms))
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda n: all(c(n) for c in checks)


_REQUIRED = "nodeaffinity.required"


def required_node_matcher(pod: PodInfo) -> NodeMatcher | None:
    """nodeSelector AND required node affinity, or None when the pod has neither."""
    if _REQUIRED not in pod.extra:
        pod.extra[_REQUIRED] = _compile_required(pod)
    matcher: NodeMatcher | None = pod.extra[_REQUIRED]
    return matcher


def pod_matches_node_selector_and_affinity(pod: PodInfo, node: NodeFacts) -> bool:
    matcher = required_node_matcher(pod)
    return matcher is None or matcher(node)


def default_normalize_raw(raw: list[int], *, reverse: bool,
                          max_priority: int = MAX_NODE_SCORE) -> list[int]:
    """`helper.DefaultNormalizeScore`: scale to [0, max_priority], optionally reversed."""
    highest = max(raw, default=0)
    if highest == 0:
        return [max_priority] * len(raw) if reverse else raw
    if reverse:
        return [max_priority - max_priority * s // highest for s in raw]
    return [max_priority * s // highest for s in raw]


def normalize_in_place(plugin: RawScoreNormalizer, state: CycleState, pod: PodInfo,
                       scores: list[NodeScore]) -> None:
    """`normalize_score` (Kubernetes' NormalizeScore on a NodeScoreList) through the
    plugin's `normalize_raw`."""
    normalized = plugin.normalize_raw(state, pod, [s.name for s in scores],
                                      [s.score for s in scores])
    for s, value in zip(scores, normalized, strict=True):
        s.score = value
