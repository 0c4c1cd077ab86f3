"""Zone disruption and the rate of NoExecute tainting (SPEC PS2), as Kubernetes 1.32's
node lifecycle controller does it, in pure pieces a fake clock can drive.

Nodes are grouped by zone (`region:\\x00:zone` from the topology labels; nodes labelled
`node.kubernetes.io/exclude-disruption` do not count). A zone with no Ready node is in
FullDisruption; with more than two not-ready nodes making up at least
`unhealthy_zone_threshold` (0.55) of it, PartialDisruption; otherwise Normal. Each zone has
a queue of nodes waiting for their NoExecute taint, drained by a token bucket (burst 1):
`node_eviction_rate` (0.1 node/s) in Normal and FullDisruption, in PartialDisruption
`secondary_node_eviction_rate` (0.01/s) when the zone has more than
`large_cluster_size_threshold` (50) nodes and 0 otherwise. When *every* zone is fully
disrupted the problem is most likely the control plane's own connectivity, so all
lifecycle NoExecute taints are removed and no zone taints anything until some node is
Ready again (then every node gets a fresh grace period).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.wellknown import (
    LABEL_EXCLUDE_DISRUPTION,
    LABEL_REGION,
    LABEL_REGION_BETA,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
)


class ZoneState(enum.StrEnum):
    INITIAL = "Initial"
    NORMAL = "Normal"
    PARTIAL_DISRUPTION = "PartialDisruption"
    FULL_DISRUPTION = "FullDisruption"


@dataclass(frozen=True)
class EvictionRates:
    """kube-controller-manager's --node-eviction-rate, --secondary-node-eviction-rate,
    --large-cluster-size-threshold and --unhealthy-zone-threshold."""

    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55


def zone_key(node: Mapping[str, Any]) -> str:
    """`GetZoneKey`: region and zone labels (GA first, beta as fallback); "" for none."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    zone = labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA) or ""
    region = labels.get(LABEL_REGION) or labels.get(LABEL_REGION_BETA) or ""
    if not zone and not region:
        return ""
    return f"{region}:\x00:{zone}"


def excluded_from_disruption(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return LABEL_EXCLUDE_DISRUPTION in labels


def compute_zone_state(ready: Iterable[str | None], *,
                       unhealthy_zone_threshold: float) -> tuple[int, ZoneState]:
    """(not-ready count, state) from the Ready condition statuses of a zone's nodes (None:
    no Ready condition, which counts as not ready)."""
    ready_nodes = not_ready = 0
    for status in ready:
        if status == "True":
            ready_nodes += 1
        else:
            not_ready += 1
    if ready_nodes == 0 and not_ready > 0:
        return not_ready, ZoneState.FULL_DISRUPTION
    if not_ready > 2 and not_ready / (not_ready + ready_nodes) >= unhealthy_zone_threshold:
        return not_ready, ZoneState.PARTIAL_DISRUPTION
    return not_ready, ZoneState.NORMAL


def tainting_rate(state: ZoneState, zone_size: int, rates: EvictionRates) -> float:
    """Nodes per second the zone may taint NoExecute in `state` (`setLimiterInZone`)."""
    if state == ZoneState.PARTIAL_DISRUPTION:
        if zone_size > rates.large_cluster_size_threshold:
            return rates.secondary_node_eviction_rate
        return 0.0
    return rates.node_eviction_rate


class TokenBucket:
    """client-go's token bucket with burst 1: one token, refilled at `qps`; qps 0 never
    grants one."""

    def __init__(self, qps: float, *, now: float) -> None:
        self.qps = qps
        self.tokens = 1.0 if qps > 0 else 0.0
        self.last = now

    def _refill(self, now: float) -> None:
        if self.qps > 0:
            self.tokens = min(1.0, self.tokens + max(0.0, now - self.last) * self.qps)
        self.last = now

    def try_accept(self, now: float) -> bool:
        self._refill(now)
        if self.qps > 0 and self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def swapped(self, qps: float, *, now: float) -> TokenBucket:
        """A bucket at the new rate; as in Kubernetes, if this one has no token now the
        new one starts without one too."""
        self._refill(now)
        bucket = TokenBucket(qps, now=now)
        if self.qps <= 0 or self.tokens < 1.0:
            bucket.tokens = 0.0
        return bucket


class ZoneTainter:
    """`RateLimitedTimedQueue`: nodes waiting for a NoExecute taint, in the order they
    were added, let through one per token."""

    def __init__(self, qps: float, *, now: float) -> None:
        self.bucket = TokenBucket(qps, now=now)
        self.queue: dict[str, None] = {}

    def add(self, node: str) -> bool:
        if node in self.queue:
            return False
        self.queue[node] = None
        return True

    def remove(self, node: str) -> bool:
        return self.queue.pop(node, 0) is None

    def swap_rate(self, qps: float, *, now: float) -> None:
        if qps != self.bucket.qps:
            self.bucket = self.bucket.swapped(qps, now=now)

    def due(self, now: float) -> list[str]:
        """The nodes whose turn has come (removed from the queue), at most one per token."""
        out: list[str] = []
        while self.queue and self.bucket.try_accept(now):
            node = next(iter(self.queue))
            del self.queue[node]
            out.append(node)
        return out


@dataclass(frozen=True)
class DisruptionDecision:
    """What a monitor pass decided: each zone's state and tainting rate, and whether the
    controller enters or leaves master disruption (every zone fully disrupted)."""

    states: dict[str, ZoneState]
    rates: dict[str, float]
    all_disrupted: bool
    entering: bool
    leaving: bool


def handle_disruption(previous: Mapping[str, ZoneState],
                      zones: Mapping[str, list[str | None]], *,
                      rates: EvictionRates) -> DisruptionDecision:
    """`handleDisruption`: `zones` maps each zone to its nodes' Ready statuses; `previous`
    is the zone states after the last pass. Zones that are gone are forgotten."""
    threshold = rates.unhealthy_zone_threshold
    new = {zone: compute_zone_state(ready, unhealthy_zone_threshold=threshold)[1]
           for zone, ready in zones.items()}
    all_now = bool(new) and all(s == ZoneState.FULL_DISRUPTION for s in new.values())
    known = {z: s for z, s in previous.items() if z in zones}
    for zone in zones:
        known.setdefault(zone, ZoneState.INITIAL)
    all_before = all(s == ZoneState.FULL_DISRUPTION for s in known.values())
    if all_now and all_before:  # still in master disruption: nothing changes
        return DisruptionDecision(known, {z: 0.0 for z in known}, True, False, False)
    if all_now:
        return DisruptionDecision({z: ZoneState.FULL_DISRUPTION for z in known},
                                  {z: 0.0 for z in known}, True, True, False)
    rate_of = {zone: tainting_rate(new[zone], len(zones[zone]), rates) for zone in zones}
    return DisruptionDecision(new, rate_of, False, False, all_before and bool(known))
