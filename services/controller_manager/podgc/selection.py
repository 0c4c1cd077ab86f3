"""Which pods PodGC removes (SPEC PS3), as pure functions of the cached pods and nodes.

Kept apart from the controller so each rule is a small, table-tested decision:
terminated pods over the threshold (oldest first), pods bound to nodes that no longer exist
(after a quarantine), terminating pods that were never scheduled, and terminating pods on a
NotReady node tainted `node.kubernetes.io/out-of-service` — a terminating pod counts
whatever its phase, as in Kubernetes 1.32.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api import is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.api.wellknown import TAINT_OUT_OF_SERVICE
from skiff.controller_manager.podutil import condition_status, creation_time, has_taint


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _oldest_first(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda p: (creation_time(p), _name(p)))


def is_evicted(pod: Mapping[str, Any]) -> bool:
    """`eviction.PodIsEvicted`: Failed with reason Evicted (the kubelet's node-pressure
    eviction)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == "Evicted"


def _evicted_then_oldest(pods: Iterable[Obj]) -> list[Obj]:
    """`byEvictionAndCreationTimestamp`: evicted pods first (they would otherwise push out
    terminated pods that controllers still look at), then oldest, then by name."""
    return sorted(pods, key=lambda p: (not is_evicted(p), creation_time(p),
                                       str((p.get("metadata") or {}).get("name") or "")))


def select_terminated(pods: Iterable[Obj], *, threshold: int) -> list[Obj]:
    """`gcTerminated`: the terminal pods beyond `threshold` (0 disables), evicted ones
    first, then the oldest."""
    terminated = [p for p in pods if is_pod_terminal(p)]
    excess = len(terminated) - threshold
    if threshold <= 0 or excess <= 0:
        return []
    return _evicted_then_oldest(terminated)[:excess]


def missing_nodes(pods: Iterable[Obj], node_names: set[str]) -> set[str]:
    """Nodes that bound pods name but that the node informer does not know."""
    return {n for p in pods if (n := _node_name(p)) and n not in node_names}


def select_orphaned(pods: Iterable[Obj], *, deleted_nodes: set[str]) -> list[Obj]:
    """`gcOrphaned`: pods bound to a node confirmed deleted."""
    return _oldest_first(p for p in pods if _node_name(p) in deleted_nodes)


def select_unscheduled_terminating(pods: Iterable[Obj]) -> list[Obj]:
    """`gcUnscheduledTerminating`: terminating pods that were never bound to a node, terminal
    ones included (nothing else would ever remove them)."""
    return _oldest_first(p for p in pods if is_terminating(p) and not _node_name(p))


def out_of_service_nodes(nodes: Iterable[Obj]) -> set[str]:
    """NotReady (False or Unknown) nodes tainted `node.kubernetes.io/out-of-service`."""
    return {str(n["metadata"]["name"]) for n in nodes
            if condition_status(n, "Ready") != "True" and has_taint(n, TAINT_OUT_OF_SERVICE)}


def select_out_of_service(pods: Iterable[Obj], nodes: Iterable[Obj]) -> list[Obj]:
    """`gcTerminating`: terminating pods on out-of-service nodes, terminal ones included,
    evicted first."""
    gone = out_of_service_nodes(nodes)
    return _evicted_then_oldest(p for p in pods if is_terminating(p) and _node_name(p) in gone)


@dataclass
class Quarantine:
    """When each missing node was first seen missing; a node is due for the fresh API
    re-check once it has been missing for `period` (PodGC's 40 s quarantine)."""

    period: float
    first_missing: dict[str, float] = field(default_factory=dict)

    def update(self, missing: set[str], now: float) -> None:
        for name in list(self.first_missing):
            if name not in missing:
                del self.first_missing[name]
        for name in missing:
            self.first_missing.setdefault(name, now)

    def due(self, now: float) -> set[str]:
        return {n for n, t in self.first_missing.items() if now - t >= self.period}

    def next_due_in(self, now: float) -> float | None:
        waits = [t + self.period - now for t in self.first_missing.values()]
        pending = [w for w in waits if w > 0]
        return min(pending) if pending else None

    def forget(self, name: str) -> None:
        self.first_missing.pop(name, None)
