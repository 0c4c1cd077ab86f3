"""The ReplicaSet's pure decisions (SPEC PS4): how many pods to add or which to remove.

A ReplicaSet prefers availability: only *active* pods count (terminal or terminating ones
do not), so a pod that starts terminating is replaced at once. Scale-down removes the
least valuable pods first, in Kubernetes' `ActivePods` order: unscheduled before scheduled,
Pending before Unknown before Running, not ready before ready, ready for less time first,
more restarts first, newer first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skiff.api import get_condition
from skiff.clock import parse_rfc3339
from skiff.controller_manager.podutil import creation_time, is_active, is_pod_ready

Obj = dict[str, Any]

BURST_REPLICAS = 500  # kube-controller-manager's burstReplicas
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def active_pods(pods: Iterable[Obj]) -> list[Obj]:
    return [p for p in pods if is_active(p)]


def replica_diff(*, replicas: int, active: int) -> int:
    """Positive: that many to create (capped at the burst); negative: that many to delete."""
    diff = replicas - active
    return max(-BURST_REPLICAS, min(BURST_REPLICAS, diff))


def slow_start_batches(count: int, *, initial: int = 1) -> list[int]:
    """Batch sizes 1, 2, 4, ... summing to `count` (Kubernetes' slowStartBatch)."""
    batches, size, left = [], max(1, initial), count
    while left > 0:
        batch = min(size, left)
        batches.append(batch)
        left -= batch
        size *= 2
    return batches


def _ready_since(pod: Mapping[str, Any]) -> float:
    cond = get_condition(pod, "Ready") or {}
    stamp = cond.get("lastTransitionTime")
    return parse_rfc3339(str(stamp)) if stamp else 0.0


def _restarts(pod: Mapping[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0)
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def deletion_rank(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key: the pod to delete first sorts first."""
    scheduled = bool((pod.get("spec") or {}).get("nodeName"))
    phase = _PHASE_RANK.get(str((pod.get("status") or {}).get("phase")), 0)
    ready = is_pod_ready(pod)
    return (scheduled, phase, ready, -_ready_since(pod) if ready else 0.0, -_restarts(pod),
            -creation_time(pod), str(pod["metadata"]["name"]))


def pods_to_delete(active: Iterable[Obj], count: int) -> list[Obj]:
    return sorted(active, key=deletion_rank)[:max(0, count)]
