"""PodDisruptionBudget arithmetic (Kubernetes' disruption controller), as pure functions.

`minAvailable: N` → expectedPods = the matching pods, desiredHealthy = N. A percentage
`minAvailable`, or any `maxUnavailable`, is measured against the *scale* of the pods'
controllers (ReplicaSet / StatefulSet `spec.replicas`): desiredHealthy = ceil(pct × scale),
or scale − maxUnavailable (percentages rounded up). currentHealthy counts Ready pods that
are not terminating and not recently evicted (`status.disruptedPods`, honoured for the
deletion timeout). disruptionsAllowed = currentHealthy − desiredHealthy, and 0 when that is
negative or when no pods are expected (Kubernetes' `updatePdbStatus`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import is_terminating
from skiff.api.types import Obj
from skiff.clock import parse_rfc3339
from skiff.controller_manager.podutil import is_pod_ready


def scaled_value(value: int | str, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent` rounding up: 3 → 3, "50%" of 5 → 3."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def needs_controller_scale(spec: Mapping[str, Any]) -> bool:
    if spec.get("maxUnavailable") is not None:
        return True
    return isinstance(spec.get("minAvailable"), str)


def desired_healthy(spec: Mapping[str, Any], *, expected: int) -> int:
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - scaled_value(spec["maxUnavailable"], expected))
    return max(0, scaled_value(spec.get("minAvailable", 0), expected))


def live_disruptions(disrupted: Mapping[str, str], pods: Iterable[Obj], *, now: float,
                     timeout: float) -> tuple[dict[str, str], float | None]:
    """`buildDisruptedPodMap`: the evictions still pending (pod present, not terminating,
    entry younger than `timeout`), and seconds until the earliest one expires."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    kept: dict[str, str] = {}
    next_expiry: float | None = None
    for name, stamp in disrupted.items():
        pod = by_name.get(name)
        if pod is None or is_terminating(pod):
            continue
        left = parse_rfc3339(stamp) + timeout - now
        if left <= 0:
            continue
        kept[name] = stamp
        next_expiry = left if next_expiry is None else min(next_expiry, left)
    return kept, next_expiry


def current_healthy(pods: Iterable[Obj], disrupted: Mapping[str, str]) -> int:
    return sum(1 for p in pods if not is_terminating(p) and is_pod_ready(p)
               and p["metadata"]["name"] not in disrupted)


@dataclass(frozen=True)
class BudgetStatus:
    expected_pods: int
    desired_healthy: int
    current_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        if self.expected_pods <= 0:
            return 0
        return max(0, self.current_healthy - self.desired_healthy)


def compute(spec: Mapping[str, Any], pods: list[Obj], disrupted: Mapping[str, str], *,
            controller_scale: int | None) -> BudgetStatus:
    """The budget of `pods`; `controller_scale` is required when the spec is relative
    (None there means the scale could not be found: nothing may be disrupted). Pods without
    a controller do not count towards the scale (they are reported, not fatal)."""
    if needs_controller_scale(spec):
        if controller_scale is None:
            return BudgetStatus(0, 0, current_healthy(pods, disrupted))
        expected = controller_scale
    else:
        expected = len(pods)
    return BudgetStatus(expected, desired_healthy(spec, expected=expected),
                        current_healthy(pods, disrupted))
