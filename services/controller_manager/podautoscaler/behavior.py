"""From the metrics' replica count to the one the HPA applies (Kubernetes'
`normalizeDesiredReplicas` and `normalizeDesiredReplicasWithBehaviors`, horizontal.go).

Each HPA keeps a `History` in the controller's memory, as Kubernetes does: its recent
recommendations (for the stabilization windows) and its recent scale events (for the rate
policies over `periodSeconds`). Without `spec.behavior` Kubernetes applies its older rules:
a scale-down waits out the controller's downscale stabilization window and a scale-up is
capped at max(2 × current, 4) a sync. With `spec.behavior`, the stabilization window of each
direction bounds the recommendation, then the policies (`selectPolicy` Max, Min or
Disabled) bound the change against what already changed within each policy's period.
Either way the result is clamped to min/max replicas and the AbleToScale and ScalingLimited
conditions say why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PODS_POLICY, PERCENT_POLICY = "Pods", "Percent"
MAX_SELECT, MIN_SELECT, DISABLED_SELECT = "Max", "Min", "Disabled"
# autoscaling/v2 defaults (pkg/apis/autoscaling/v2/defaults.go).
SCALE_UP_DEFAULT_POLICIES: tuple[tuple[str, int, int], ...] = (
    (PODS_POLICY, 4, 15), (PERCENT_POLICY, 100, 15))
SCALE_DOWN_DEFAULT_POLICIES: tuple[tuple[str, int, int], ...] = ((PERCENT_POLICY, 100, 15),)
# The rule without spec.behavior: at most max(2 × current, 4) after one sync.
SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM = 2.0, 4.0
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

READY_FOR_NEW_SCALE = ("ReadyForNewScale", "recommended size matches current size")
SCALE_DOWN_STABILIZED = ("ScaleDownStabilized", "recent recommendations were higher than "
                         "current one, applying the highest recent recommendation")
SCALE_UP_STABILIZED = ("ScaleUpStabilized", "recent recommendations were lower than current "
                       "one, applying the lowest recent recommendation")
DESIRED_WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
TOO_FEW_REPLICAS = ("TooFewReplicas",
                    "the desired replica count is less than the minimum replica count")
TOO_MANY_REPLICAS = ("TooManyReplicas",
                     "the desired replica count is more than the maximum replica count")
SCALE_UP_LIMIT = ("ScaleUpLimit",
                  "the desired replica count is increasing faster than the maximum scale rate")
SCALE_DOWN_LIMIT = ("ScaleDownLimit",
                    "the desired replica count is decreasing faster than the maximum scale rate")


@dataclass(frozen=True)
class Policy:
    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    stabilization_window_seconds: int
    select_policy: str
    policies: tuple[Policy, ...]

    @property
    def longest_period(self) -> int:
        return max((p.period_seconds for p in self.policies), default=0)


@dataclass(frozen=True)
class Behavior:
    scale_up: ScalingRules
    scale_down: ScalingRules


def _rules(spec: Mapping[str, Any] | None, *, window: int,
           policies: tuple[tuple[str, int, int], ...]) -> ScalingRules:
    spec = spec or {}
    raw_window = spec.get("stabilizationWindowSeconds")
    raw_policies = spec.get("policies")
    if raw_policies is None:
        parsed = tuple(Policy(t, v, p) for t, v, p in policies)
    else:
        parsed = tuple(Policy(str(p.get("type")), int(p.get("value") or 0),
                              int(p.get("periodSeconds") or 0)) for p in raw_policies)
    return ScalingRules(window if raw_window is None else int(raw_window),
                        str(spec.get("selectPolicy") or MAX_SELECT), parsed)


def behavior_from_spec(spec: Mapping[str, Any] | None, *,
                       downscale_stabilization: float) -> Behavior | None:
    """`spec.behavior` with every missing piece defaulted as the apiserver does (and a
    missing scale-down window taken from the controller's setting); None when absent."""
    if spec is None:
        return None
    return Behavior(
        scale_up=_rules(spec.get("scaleUp"), window=0, policies=SCALE_UP_DEFAULT_POLICIES),
        scale_down=_rules(spec.get("scaleDown"), window=int(downscale_stabilization),
                          policies=SCALE_DOWN_DEFAULT_POLICIES))


@dataclass
class Recommendation:
    replicas: int
    timestamp: float


@dataclass
class ScaleEvent:
    change: int
    timestamp: float
    outdated: bool = False


@dataclass
class History:
    """What the controller remembers of one HPA between syncs."""

    recommendations: list[Recommendation] = field(default_factory=list)
    scale_up_events: list[ScaleEvent] = field(default_factory=list)
    scale_down_events: list[ScaleEvent] = field(default_factory=list)

    def record_initial(self, current: int, now: float) -> None:
        """The first sync of an HPA counts the current size as a recommendation."""
        if not self.recommendations:
            self.recommendations.append(Recommendation(current, now))

    def record_recommendation(self, replicas: int, now: float, old_index: int | None) -> None:
        if old_index is None:
            self.recommendations.append(Recommendation(replicas, now))
        else:
            self.recommendations[old_index] = Recommendation(replicas, now)

    def store_scale_event(self, behavior: Behavior | None, previous: int, new: int,
                          now: float) -> None:
        """Remember a rescale for the rate policies, reusing a slot that fell out of the
        longest policy period (only with spec.behavior: the older rules need none)."""
        if behavior is None:
            return
        if new > previous:
            events, rules, change = self.scale_up_events, behavior.scale_up, new - previous
        else:
            events, rules, change = self.scale_down_events, behavior.scale_down, previous - new
        cutoff = now - rules.longest_period
        old_index = None
        for i, event in enumerate(events):
            if event.timestamp < cutoff:
                event.outdated = True
            if event.outdated:
                old_index = i
        if old_index is None:
            events.append(ScaleEvent(change, now))
        else:
            events[old_index] = ScaleEvent(change, now)


@dataclass(frozen=True)
class Normalized:
    """The replica count to apply and the AbleToScale / ScalingLimited conditions:
    `(status, reason, message)` each."""

    replicas: int
    able_to_scale: tuple[str, str, str]
    scaling_limited: tuple[str, str, str]


def _limited(replicas: int, stabilized: int, reason: tuple[str, str]) -> tuple[str, str, str]:
    return ("False" if replicas == stabilized else "True", *reason)


def normalize(history: History, behavior: Behavior | None, *, current: int, desired: int,
              min_replicas: int, max_replicas: int, now: float,
              downscale_stabilization: float) -> Normalized:
    """The desired count after stabilization, rate limits and min/max clamping."""
    if behavior is None:
        return _normalize_without_behavior(history, current=current, desired=desired,
                                           min_replicas=min_replicas,
                                           max_replicas=max_replicas, now=now,
                                           window=downscale_stabilization)
    stabilized, reason = _stabilize_with_behavior(history, behavior, current=current,
                                                  desired=desired, now=now)
    able = reason if stabilized != desired else READY_FOR_NEW_SCALE
    replicas, limit = _apply_rate_limits(history, behavior, current=current,
                                         desired=stabilized, min_replicas=min_replicas,
                                         max_replicas=max_replicas, now=now)
    return Normalized(replicas, ("True", *able), _limited(replicas, stabilized, limit))


def _normalize_without_behavior(history: History, *, current: int, desired: int,
                                min_replicas: int, max_replicas: int, now: float,
                                window: float) -> Normalized:
    cutoff = now - window
    stabilized, old_index = desired, None
    for i, rec in enumerate(history.recommendations):
        if rec.timestamp < cutoff:
            old_index = i
        elif rec.replicas > stabilized:
            stabilized = rec.replicas
    history.record_recommendation(desired, now, old_index)
    able = SCALE_DOWN_STABILIZED if stabilized != desired else READY_FOR_NEW_SCALE
    scale_up_limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > scale_up_limit:
        maximum, limit = scale_up_limit, SCALE_UP_LIMIT
    else:
        maximum, limit = max_replicas, TOO_MANY_REPLICAS
    if stabilized < min_replicas:
        replicas, limit = min_replicas, TOO_FEW_REPLICAS
    elif stabilized > maximum:
        replicas = maximum
    else:
        replicas, limit = stabilized, DESIRED_WITHIN_RANGE
    return Normalized(replicas, ("True", *able), _limited(replicas, stabilized, limit))


def _stabilize_with_behavior(history: History, behavior: Behavior, *, current: int,
                             desired: int, now: float) -> tuple[int, tuple[str, str]]:
    """Keep the recommendation between the lowest one within the scale-up window and the
    highest one within the scale-down window; record the unstabilized one."""
    up_cutoff = now - behavior.scale_up.stabilization_window_seconds
    down_cutoff = now - behavior.scale_down.stabilization_window_seconds
    up, down, old_index = desired, desired, None
    for i, rec in enumerate(history.recommendations):
        if rec.timestamp > up_cutoff:
            up = min(up, rec.replicas)
        if rec.timestamp > down_cutoff:
            down = max(down, rec.replicas)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    recommendation = min(max(current, up), down)
    history.record_recommendation(desired, now, old_index)
    return recommendation, (SCALE_UP_STABILIZED if desired >= current
                            else SCALE_DOWN_STABILIZED)


def _changed_within(period: int, events: list[ScaleEvent], now: float) -> int:
    cutoff = now - period
    return sum(e.change for e in events if e.timestamp > cutoff)


def _period_start(current: int, policy: Policy, history: History, now: float) -> int:
    added = _changed_within(policy.period_seconds, history.scale_up_events, now)
    deleted = _changed_within(policy.period_seconds, history.scale_down_events, now)
    return current - added + deleted


def scale_up_limit(current: int, history: History, rules: ScalingRules, now: float) -> int:
    """The most replicas the scale-up policies allow now (`selectPolicy` Max: the most
    permissive policy, Min: the least; Disabled: the current count)."""
    if rules.select_policy == DISABLED_SELECT:
        return current
    pick_min = rules.select_policy == MIN_SELECT
    result = _INT32_MAX if pick_min else _INT32_MIN
    for policy in rules.policies:
        start = _period_start(current, policy, history, now)
        if policy.type == PODS_POLICY:
            proposed = start + policy.value
        elif policy.type == PERCENT_POLICY:
            proposed = math.ceil(start * (1 + policy.value / 100))
        else:
            continue
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit(current: int, history: History, rules: ScalingRules, now: float) -> int:
    """The fewest replicas the scale-down policies allow now."""
    if rules.select_policy == DISABLED_SELECT:
        return current
    pick_min = rules.select_policy == MIN_SELECT  # the smallest change: the highest count
    result = _INT32_MIN if pick_min else _INT32_MAX
    for policy in rules.policies:
        start = _period_start(current, policy, history, now)
        if policy.type == PODS_POLICY:
            proposed = start - policy.value
        elif policy.type == PERCENT_POLICY:
            proposed = math.trunc(start * (1 - policy.value / 100))
        else:
            continue
        result = max(result, proposed) if pick_min else min(result, proposed)
    return result


def _apply_rate_limits(history: History, behavior: Behavior, *, current: int, desired: int,
                       min_replicas: int, max_replicas: int,
                       now: float) -> tuple[int, tuple[str, str]]:
    if desired > current:
        up_limit = max(scale_up_limit(current, history, behavior.scale_up, now), current)
        if max_replicas > up_limit:
            maximum, limit = up_limit, SCALE_UP_LIMIT
        else:
            maximum, limit = max_replicas, TOO_MANY_REPLICAS
        if desired > maximum:
            return maximum, limit
    elif desired < current:
        down_limit = min(scale_down_limit(current, history, behavior.scale_down, now), current)
        if min_replicas < down_limit:
            minimum, limit = down_limit, SCALE_DOWN_LIMIT
        else:
            minimum, limit = min_replicas, TOO_FEW_REPLICAS
        if desired < minimum:
            return minimum, limit
    return desired, DESIRED_WITHIN_RANGE
