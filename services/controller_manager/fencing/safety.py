"""The fencing controller's guard against a control-plane-side partition (SPEC FN1).

The node lifecycle controller (nodelifecycle/zones.py) treats "every zone fully disrupted"
(no node Ready anywhere) as the control plane's own connectivity failing, not the nodes':
it stops tainting until some node is Ready again, then gives every node a fresh grace
period. Fencing powers nodes off, so it must be at least as careful: while every zone is
fully disrupted nothing is fenced, and once the disruption ends a node is fenced only after
a whole `fencing-delay` more, counted from that moment (its partition clock restarts, as
the lifecycle controller's grace period does). The zone states come from the same pure
functions the lifecycle controller uses, over the same informer cache of Nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skiff.api import get_condition
from skiff.controller_manager.nodelifecycle.zones import (
    ZoneState,
    compute_zone_state,
    excluded_from_disruption,
    zone_key,
)


def every_zone_fully_disrupted(nodes: Iterable[Mapping[str, Any]], *,
                               unhealthy_zone_threshold: float = 0.55) -> bool:
    """True when no zone has a Ready node (nodes labelled exclude-disruption do not count),
    and there is at least one zone."""
    zones: dict[str, list[str | None]] = {}
    for node in nodes:
        if excluded_from_disruption(node):
            continue
        ready = get_condition(node, "Ready")
        zones.setdefault(zone_key(node), []).append(
            None if ready is None else str(ready.get("status")))
    states = [compute_zone_state(ready, unhealthy_zone_threshold=unhealthy_zone_threshold)[1]
              for ready in zones.values()]
    return bool(states) and all(s == ZoneState.FULL_DISRUPTION for s in states)


class ControlPlaneGuard:
    """Remembers when the last all-zones disruption ended. `hold(nodes, now)` returns why
    fencing must wait (None: it may go on) and `recheck_in` seconds when to look again."""

    def __init__(self, *, delay: float, unhealthy_zone_threshold: float = 0.55) -> None:
        self.delay = delay
        self.threshold = unhealthy_zone_threshold
        self.disrupted = False
        self.ended_at: float | None = None  # wall time the last full disruption ended

    def hold(self, nodes: Iterable[Mapping[str, Any]], now: float
             ) -> tuple[str | None, float | None]:
        if every_zone_fully_disrupted(nodes, unhealthy_zone_threshold=self.threshold):
            self.disrupted = True
            return ("every zone is fully disrupted (no node is Ready): most likely the "
                    "control plane is partitioned from the nodes, so no node is fenced",
                    max(self.delay, 1.0))
        if self.disrupted:
            self.disrupted = False
            self.ended_at = now
        if self.ended_at is not None and now - self.ended_at < self.delay:
            left = self.delay - (now - self.ended_at)
            return (f"a full disruption of every zone ended {now - self.ended_at:.1f}s ago; "
                    f"partitioned nodes get a fresh fencing delay of {self.delay:g}s", left)
        return None, None
