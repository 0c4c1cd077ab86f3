"""The ReplicaSet's pure decisions (SPEC PS4): how many pods to add or which to remove.

A ReplicaSet prefers availability: only *active* pods count (terminal or terminating ones
do not), so a pod that starts terminating is replaced at once. Scale-down removes the
least valuable pods first, in Kubernetes 1.32's `ActivePodsWithRanks` order: unscheduled
before scheduled, Pending before Unknown before Running, not ready before ready, lower
`controller.kubernetes.io/pod-deletion-cost` first, more pods of the set on the same node
first, ready for less time first and then newer first — both by logarithmic age buckets
(ages within a power of two tie, broken by UID) — and more restarts (of the container that
restarted most) first. A pod is *available* once it has been ready for `minReadySeconds`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from skiff.api.types import Obj
from skiff.controller_manager.expectations import slow_start_batches as slow_start_batches
from skiff.controller_manager.podutil import (
    creation_time,
    is_active,
    is_pod_ready,
    ready_since,
)

BURST_REPLICAS = 500  # kube-controller-manager's burstReplicas
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def active_pods(pods: Iterable[Obj]) -> list[Obj]:
    return [p for p in pods if is_active(p)]


def replica_diff(*, replicas: int, active: int) -> int:
    """Positive: that many to create (capped at the burst); negative: that many to delete."""
    diff = replicas - active
    return max(-BURST_REPLICAS, min(BURST_REPLICAS, diff))


DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


def deletion_cost(pod: Mapping[str, Any]) -> int:
    """The `controller.kubernetes.io/pod-deletion-cost` annotation (an int32; 0 when absent
    or invalid)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(
        DELETION_COST_ANNOTATION)
    try:
        cost = int(str(value).strip())
    except (TypeError, ValueError):
        return 0
    return cost if -2**31 <= cost < 2**31 else 0


def max_restarts(pod: Mapping[str, Any]) -> tuple[int, int]:
    """`maxContainerRestarts`: the most restarts of one app container, then of one
    sidecar (an init container with restartPolicy Always)."""
    status = pod.get("status") or {}
    regular = max((int(c.get("restartCount") or 0)
                   for c in status.get("containerStatuses") or []), default=0)
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    sidecar = max((int(c.get("restartCount") or 0)
                   for c in status.get("initContainerStatuses") or []
                   if c.get("name") in sidecars), default=0)
    return regular, sidecar


def log_rank(then: float, now: float) -> int:
    """floor(log2(age in nanoseconds)), -1 for no age: ages within a power of two rank
    the same (`logarithmicRankDiff`, LogarithmicScaleDown)."""
    age = int(round((now - then) * 1e9))
    return int(math.log2(age)) if age > 0 else -1


def colocation_ranks(pods: Iterable[Mapping[str, Any]],
                     related: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """`getPodsRankedByRelatedPodsOnSameNode`: for each pod (by UID), how many active
    related pods share its node."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_active(pod):
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            on_node[node] = on_node.get(node, 0) + 1
    return {_uid(p): on_node.get(str((p.get("spec") or {}).get("nodeName") or ""), 0)
            for p in pods}


def _uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name") or "")


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def compare_for_deletion(a: Mapping[str, Any], b: Mapping[str, Any], *,
                         ranks: Mapping[str, int], now: float) -> int:
    """`ActivePodsWithRanks.Less` as a comparison: negative when `a` goes first."""
    node_a = str((a.get("spec") or {}).get("nodeName") or "")
    node_b = str((b.get("spec") or {}).get("nodeName") or "")
    if node_a != node_b and (not node_a or not node_b):
        return -1 if not node_a else 1  # unscheduled first
    phase_a = _PHASE_RANK.get(str((a.get("status") or {}).get("phase")), 0)
    phase_b = _PHASE_RANK.get(str((b.get("status") or {}).get("phase")), 0)
    if phase_a != phase_b:
        return _cmp(phase_a, phase_b)  # Pending < Unknown < Running
    ready_a, ready_b = is_pod_ready(a), is_pod_ready(b)
    if ready_a != ready_b:
        return -1 if not ready_a else 1  # not ready first
    if (cost := _cmp(deletion_cost(a), deletion_cost(b))) != 0:
        return cost  # lower pod-deletion-cost first
    rank_a, rank_b = ranks.get(_uid(a), 0), ranks.get(_uid(b), 0)
    if rank_a != rank_b:
        return -1 if rank_a > rank_b else 1  # more pods doubled up on its node first
    if ready_a and ready_b:
        since_a, since_b = ready_since(a), ready_since(b)
        if since_a != since_b:
            if since_a is None or since_b is None:
                return -1 if since_a is None else 1  # no ready time first
            diff = log_rank(since_a, now) - log_rank(since_b, now)
            if diff == 0:
                return _cmp_uid(a, b)
            return -1 if diff < 0 else 1  # ready for less time first
    restarts_a, restarts_b = max_restarts(a), max_restarts(b)
    if restarts_a != restarts_b:
        return -1 if restarts_a > restarts_b else 1  # more restarts first
    created_a, created_b = creation_time(a), creation_time(b)
    if created_a != created_b:
        if not created_a or not created_b:
            return -1 if not created_a else 1
        diff = log_rank(created_a, now) - log_rank(created_b, now)
        if diff == 0:
            return _cmp_uid(a, b)
        return -1 if diff < 0 else 1  # newer first
    return 0


def _cmp_uid(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    ua, ub = str((a.get("metadata") or {}).get("uid") or ""), str(
        (b.get("metadata") or {}).get("uid") or "")
    return -1 if ua < ub else (1 if ua > ub else 0)


def pods_to_delete(active: Iterable[Obj], count: int, *,
                   related: Iterable[Obj] | None = None, now: float) -> list[Obj]:
    """`getPodsToDelete`: the first `count` pods in `ActivePodsWithRanks` order, ranked
    by co-location with `related` (the ReplicaSet's own pods by default)."""
    pods = list(active)
    if count >= len(pods):
        return pods
    ranks = colocation_ranks(pods, pods if related is None else related)
    def compare(a: Obj, b: Obj) -> int:
        return compare_for_deletion(a, b, ranks=ranks, now=now)

    ordered = sorted(pods, key=functools.cmp_to_key(compare))
    return ordered[:max(0, count)]
