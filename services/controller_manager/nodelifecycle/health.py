"""How the node lifecycle controller judges a node (SPEC PS2), as pure functions.

A node is alive while its kubelet keeps changing something we can see: the Lease
`kube-node-lease/<node>` (`spec.renewTime`) or its Ready condition's heartbeat. As in
Kubernetes we time *our observation* of a change (`probe_at`, monotonic), not the
timestamps the kubelet wrote, so clock skew between machines does not matter. No change for
the grace period → every condition goes Unknown; the Ready condition decides the taints.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import get_condition
from skiff.clock import rfc3339
from skiff.controller_manager.podutil import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    taints_of,
)

Obj = dict[str, Any]

NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
LIFECYCLE_TAINT_KEYS = (TAINT_UNREACHABLE, TAINT_NOT_READY)


@dataclass(frozen=True)
class NodeHealth:
    """What we last saw of a node's heartbeats, and when (our monotonic clock)."""

    probe_at: float
    lease_renew_time: str = ""
    ready_heartbeat: str = ""
    ready_transition: str = ""
    ever_ready_reported: bool = False


def _ready_stamps(node: Mapping[str, Any]) -> tuple[str, str]:
    cond = get_condition(node, "Ready") or {}
    return str(cond.get("lastHeartbeatTime") or ""), str(cond.get("lastTransitionTime") or "")


def observe(previous: NodeHealth | None, *, node: Mapping[str, Any],
            lease: Mapping[str, Any] | None, now: float) -> NodeHealth:
    """Fold the current node and lease into the health record: a changed heartbeat moves
    `probe_at` to `now`; otherwise it stays."""
    renew = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
    heartbeat, transition = _ready_stamps(node)
    ever = get_condition(node, "Ready") is not None
    if previous is None:
        return NodeHealth(now, renew, heartbeat, transition, ever)
    changed = ((renew and renew != previous.lease_renew_time)
               or (heartbeat and heartbeat != previous.ready_heartbeat)
               or (transition and transition != previous.ready_transition))
    return NodeHealth(now if changed else previous.probe_at, renew, heartbeat, transition,
                      ever or previous.ever_ready_reported)


def is_stale(health: NodeHealth, *, now: float, grace_period: float,
             startup_grace_period: float) -> bool:
    """No heartbeat for the grace period (the startup grace if the kubelet never reported)."""
    grace = grace_period if health.ever_ready_reported else startup_grace_period
    return now - health.probe_at > grace


def mark_unknown(node: Mapping[str, Any], *, now: float) -> Obj | None:
    """A copy of `node` with every condition Unknown, or None if Ready is Unknown already."""
    ready = get_condition(node, "Ready")
    if ready is not None and ready.get("status") == "Unknown":
        return None
    updated: Obj = copy.deepcopy(dict(node))
    conditions: list[Obj] = updated.setdefault("status", {}).setdefault("conditions", [])
    stamp = rfc3339(now)
    by_type = {c.get("type"): c for c in conditions}
    for ctype in NODE_CONDITIONS:
        cond = by_type.get(ctype)
        if cond is None:
            if ctype != "Ready":
                continue
            conditions.append({"type": "Ready", "status": "Unknown",
                               "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.",
                               "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
            continue
        if cond.get("status") != "Unknown":
            cond["status"] = "Unknown"
            cond["lastTransitionTime"] = stamp
        cond["reason"] = "NodeStatusUnknown"
        cond["message"] = "Kubelet stopped posting node status."
    return updated


def desired_taints(node: Mapping[str, Any], *, now: float) -> list[Obj]:
    """The node's taints with the lifecycle taints set for its Ready condition: False →
    not-ready, Unknown → unreachable (NoSchedule + NoExecute), True → neither. A taint
    that stays keeps its `timeAdded`, so tolerationSeconds count from when it appeared."""
    ready = get_condition(node, "Ready")
    status = ready.get("status") if ready else None
    want_key = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}.get(str(status))
    current = taints_of(node)
    kept = [copy.deepcopy(t) for t in current if t.get("key") not in LIFECYCLE_TAINT_KEYS]
    if want_key is None:
        return kept
    for effect in (NO_SCHEDULE, NO_EXECUTE):
        existing = next((t for t in current
                         if t.get("key") == want_key and t.get("effect") == effect), None)
        if existing is not None:
            kept.append(copy.deepcopy(existing))
            continue
        taint: Obj = {"key": want_key, "effect": effect}
        if effect == NO_EXECUTE:
            taint["timeAdded"] = rfc3339(now)
        kept.append(taint)
    return kept
