"""What PodTopologySpread's filter and score share: constraints as the plugin sees them,
the cluster default constraints (TS4) with their owner-derived selector, and counting the
matching pods of a node.

Counting follows Kubernetes' `countPodsMatchSelector`: only pods in the incoming pod's
namespace that are not terminating, and none at all for an empty selector
(`labelSelector: {}`), although such a selector still matches the incoming pod itself.
`NodeInfo.label_sets` groups a node's pods by label set, so each distinct label set is
matched against a selector once per cycle.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from skiff.api import LabelSelector
from skiff.api.wellknown import LABEL_HOSTNAME, LABEL_ZONE
from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.plugins.helpers import find_untolerated_taint, required_node_matcher
from skiff.scheduler.podinfo import NodeFacts, PodInfo

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"

# Kubernetes' `defaultingType: System` constraints (used when the config sets none).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": LABEL_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    """pluginConfig args: `defaultConstraints` + `defaultingType` (System | List)."""

    default_constraints: tuple[Mapping[str, Any], ...] = ()
    defaulting_type: str = "System"

    @classmethod
    def from_dict(cls, args: Mapping[str, Any] | None) -> PodTopologySpreadArgs:
        args = args or {}
        defaulting = str(args.get("defaultingType") or "System")
        if defaulting not in ("System", "List"):
            raise ValueError(f"PodTopologySpread args: defaultingType: Unsupported value: "
                             f'"{defaulting}": supported values: "List", "System"')
        constraints = tuple(args.get("defaultConstraints") or ())
        for i, c in enumerate(constraints):
            if c.get("labelSelector") is not None:
                raise ValueError(f"PodTopologySpread args: defaultConstraints[{i}]."
                                 "labelSelector: Forbidden: constraint must not define a "
                                 "selector, as they deduced for each pod")
        if defaulting == "System" and constraints:
            raise ValueError("PodTopologySpread args: defaultConstraints: Invalid value: "
                             "when .defaultingType is System, .defaultConstraints must be "
                             "empty")
        return cls(constraints, defaulting)

    @property
    def system_defaulted(self) -> bool:
        return self.defaulting_type == "System"

    @property
    def effective_defaults(self) -> tuple[Mapping[str, Any], ...]:
        return SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else self.default_constraints


class OwnerLister(Protocol):
    """Looks up a pod's controller (ReplicaSet, StatefulSet) for default selectors."""

    def get_owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(eq=False)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    _memo: dict[frozenset[tuple[str, str]], bool] = field(default_factory=dict, repr=False)

    def matches_labels(self, label_set: frozenset[tuple[str, str]]) -> bool:
        hit = self._memo.get(label_set)
        if hit is None:
            hit = self._memo[label_set] = self.selector.matches(dict(label_set))
        return hit

    def matches_node_inclusion_policies(self, pod: PodInfo, node: NodeFacts) -> bool:
        if self.node_affinity_policy == HONOR:
            matcher = required_node_matcher(pod)
            if matcher is not None and not matcher(node):
                return False
        if self.node_taints_policy == HONOR and node.taints:
            if find_untolerated_taint(node.taints, pod.tolerations,
                                      ("NoSchedule", "NoExecute")) is not None:
                return False
        return True

    def count_matching(self, node: NodeInfo, namespace: str) -> int:
        """Non-terminating pods of `namespace` on `node` that the selector matches; none
        for an empty selector (Kubernetes' `countPodsMatchSelector`)."""
        if self.selector.empty:
            return 0
        total = 0
        for (ns, label_set), n in node.label_sets.items():
            if ns == namespace and self.matches_labels(label_set):
                total += n
        return total


def _selector_with_match_label_keys(raw: Mapping[str, Any] | None, keys: Sequence[str],
                                    pod_labels: Mapping[str, str]) -> LabelSelector:
    if not keys:
        return LabelSelector.from_dict(raw)
    merged = copy.deepcopy(dict(raw or {}))
    expressions = list(merged.get("matchExpressions") or [])
    for key in keys:
        if key in pod_labels:
            expressions.append({"key": key, "operator": "In", "values": [pod_labels[key]]})
    merged["matchExpressions"] = expressions
    return LabelSelector.from_dict(merged)


def filter_constraints(raw: Sequence[Mapping[str, Any]], pod_labels: Mapping[str, str],
                       action: str, *, selector: LabelSelector | None = None
                       ) -> list[Constraint]:
    """The constraints with `whenUnsatisfiable == action`, parsed."""
    out = []
    for c in raw:
        if (c.get("whenUnsatisfiable") or DO_NOT_SCHEDULE) != action:
            continue
        sel = selector if selector is not None else _selector_with_match_label_keys(
            c.get("labelSelector"), c.get("matchLabelKeys") or (), pod_labels)
        out.append(Constraint(
            max_skew=int(c.get("maxSkew", 1)), topology_key=str(c.get("topologyKey", "")),
            selector=sel, min_domains=int(c.get("minDomains") or 1),
            node_affinity_policy=str(c.get("nodeAffinityPolicy") or HONOR),
            node_taints_policy=str(c.get("nodeTaintsPolicy") or IGNORE)))
    return out


def default_selector(pod: PodInfo, owners: OwnerLister | None) -> LabelSelector | None:
    """Kubernetes' `helper.DefaultSelector` for the kinds Skiff has: the selector of the
    ReplicaSet or StatefulSet that controls the pod; None when there is none."""
    ref = pod.controller_ref
    if ref is None or owners is None:
        return None
    kind = str(ref.get("kind", ""))
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    if kind not in ("ReplicaSet", "StatefulSet") or group != "apps":
        return None
    owner = owners.get_owner(kind, pod.namespace, str(ref.get("name", "")))
    if owner is None:
        return None
    raw = (owner.get("spec") or {}).get("selector")
    if raw is None:
        return None
    selector = LabelSelector.from_dict(raw)
    return None if selector.empty else selector


def pod_constraints(pod: PodInfo, action: str, args: PodTopologySpreadArgs,
                    owners: OwnerLister | None) -> list[Constraint]:
    """The pod's own constraints of `action`, or (TS4) the cluster defaults — only for a
    pod with no constraints at all that a ReplicaSet/StatefulSet owns."""
    if pod.spread_constraints:
        # Parsed once per pod version (selectors included), not once per cycle.
        memo_key = f"podtopologyspread.{action}"
        own: list[Constraint] | None = pod.extra.get(memo_key)
        if own is None:
            own = pod.extra[memo_key] = filter_constraints(pod.spread_constraints,
                                                           pod.labels, action)
        return own
    defaults = args.effective_defaults
    if not defaults:
        return []
    selector = default_selector(pod, owners)
    if selector is None:
        return []
    return filter_constraints(defaults, pod.labels, action, selector=selector)


def node_has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)
