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
from skiff.api.types import Obj
from skiff.api.wellknown import (
    TAINT_DISK_PRESSURE,
    TAINT_MEMORY_PRESSURE,
    TAINT_NETWORK_UNAVAILABLE,
    TAINT_NOT_READY,
    TAINT_PID_PRESSURE,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
)
from skiff.clock import rfc3339
from skiff.controller_manager.podutil import NO_EXECUTE, NO_SCHEDULE, taints_of

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


# TaintNodesByCondition: condition type → {status: taint key}, each a NoSchedule taint.
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE},
    "MemoryPressure": {"True": TAINT_MEMORY_PRESSURE},
    "DiskPressure": {"True": TAINT_DISK_PRESSURE},
    "NetworkUnavailable": {"True": TAINT_NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": TAINT_PID_PRESSURE},
}
CONDITION_TAINT_KEYS = frozenset(
    [k for by_status in CONDITION_TAINTS.values() for k in by_status.values()]
    + [TAINT_UNSCHEDULABLE])


def condition_taints(node: Mapping[str, Any]) -> list[Obj]:
    """The NoSchedule taints the node's conditions and `spec.unschedulable` call for."""
    wanted: list[Obj] = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
        if key:
            wanted.append({"key": key, "effect": NO_SCHEDULE})
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append({"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return wanted


def desired_no_schedule_taints(node: Mapping[str, Any], *, now: float) -> list[Obj]:
    """`doNoScheduleTaintingPass`: the node's taints with the condition NoSchedule taints
    set to what `condition_taints` says; every other taint (NoExecute ones included) is
    kept as it is, and a condition taint that stays keeps its `timeAdded`."""
    current = taints_of(node)
    kept = [copy.deepcopy(t) for t in current
            if not (t.get("effect") == NO_SCHEDULE and t.get("key") in CONDITION_TAINT_KEYS)]
    for want in condition_taints(node):
        existing = next((t for t in current if t.get("key") == want["key"]
                         and t.get("effect") == NO_SCHEDULE), None)
        kept.append(copy.deepcopy(existing) if existing is not None
                    else {**want, "timeAdded": rfc3339(now)})
    return kept


def no_execute_key(ready_status: str | None) -> str | None:
    """The lifecycle NoExecute taint a Ready status calls for: False → not-ready,
    Unknown → unreachable, True (or none) → neither."""
    return {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}.get(str(ready_status))


def with_no_execute(node: Mapping[str, Any], key: str | None, *, now: float) -> list[Obj]:
    """The node's taints with exactly the lifecycle NoExecute taint `key` (None: none of
    them). A taint that stays keeps its `timeAdded`, so tolerationSeconds count from when
    it appeared."""
    current = taints_of(node)
    out = [copy.deepcopy(t) for t in current
           if not (t.get("effect") == NO_EXECUTE and t.get("key") in LIFECYCLE_TAINT_KEYS
                   and t.get("key") != key)]
    if key is not None and not any(t.get("key") == key and t.get("effect") == NO_EXECUTE
                                   for t in current):
        out.append({"key": key, "effect": NO_EXECUTE, "timeAdded": rfc3339(now)})
    return out
