"""The Deployment controller's arithmetic, as pure functions (pkg/controller/deployment/util).

Which ReplicaSet is "new" (its template equals the Deployment's, ignoring the
pod-template-hash label), how far a rolling update may scale the new set up (`maxSurge`,
rounded up) and the old sets down (`maxUnavailable`, rounded down; both 0 → 1 unavailable),
the revision numbers, and the Deployment's status and conditions.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from skiff.api.names import object_hash
from skiff.api.types import Obj
from skiff.api.wellknown import POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """A short, label-safe hash of the pod template (FNV-1a 32 over a canonical form, the
    decimal digits spelled in Kubernetes' vowel-free alphabet so it never forms words)."""
    return object_hash(_semantic(template),
                       str(collision_count).encode() if collision_count else b"")


def _semantic(value: Any) -> Any:
    """Go's semantic equality on JSON: a null, empty map or empty list equals a missing
    field (`creationTimestamp: null`, `resources: {}` that clients send)."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _without_hash(template: Obj) -> Obj:
    t: Obj = _semantic(copy.deepcopy(template or {}))
    labels = (t.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return t


def equal_ignore_hash(a: Obj, b: Obj) -> bool:
    return _without_hash(a) == _without_hash(b)


def find_new(deployment: Obj, sets: list[Obj]) -> Obj | None:
    """The oldest ReplicaSet whose template is the Deployment's (ignoring the hash label)."""
    template = deployment["spec"].get("template") or {}
    matching = [rs for rs in sets if equal_ignore_hash(rs["spec"].get("template") or {},
                                                       template)]
    matching.sort(key=lambda rs: (rs["metadata"].get("creationTimestamp", ""),
                                  rs["metadata"]["name"]))
    return matching[0] if matching else None


def revision(rs: Obj) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0"))
    except ValueError:
        return 0


def next_revision(old_sets: list[Obj]) -> int:
    return max((revision(rs) for rs in old_sets), default=0) + 1


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def surge_and_unavailable(deployment: Obj) -> tuple[int, int]:
    """`ResolveFenceposts`: (maxSurge, maxUnavailable) as pod counts."""
    spec = deployment["spec"]
    strategy = spec.get("strategy") or {}
    if strategy.get("type") != "RollingUpdate":
        return 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    replicas = int(spec.get("replicas", 1))
    surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def replicas_of(rs: Obj) -> int:
    return int(rs["spec"].get("replicas") or 0)


def available_of(rs: Obj) -> int:
    return int((rs.get("status") or {}).get("availableReplicas") or 0)


def new_replicas_target(deployment: Obj, new: Obj, all_sets: list[Obj]) -> int:
    """`NewRSNewReplicas` for RollingUpdate: scale up as far as `maxSurge` allows."""
    replicas = int(deployment["spec"].get("replicas", 1))
    current = replicas_of(new)
    if current >= replicas:
        return replicas
    surge, _ = surge_and_unavailable(deployment)
    total = sum(replicas_of(rs) for rs in all_sets)
    room = replicas + surge - total
    if room <= 0:
        return current
    return current + min(room, replicas - current)


def old_scale_downs(deployment: Obj, new: Obj | None, old_sets: list[Obj]) -> dict[str, int]:
    """`reconcileOldReplicaSets`: the new `spec.replicas` of each old set to scale down,
    first the unhealthy replicas, then the available ones down to the `maxUnavailable`
    budget (oldest set first)."""
    old_total = sum(replicas_of(rs) for rs in old_sets)
    if old_total == 0:
        return {}
    replicas = int(deployment["spec"].get("replicas", 1))
    _, max_unavailable = surge_and_unavailable(deployment)
    min_available = replicas - max_unavailable
    all_sets = [*old_sets, *([new] if new else [])]
    all_total = sum(replicas_of(rs) for rs in all_sets)
    new_unavailable = (replicas_of(new) - available_of(new)) if new else 0
    budget = all_total - min_available - new_unavailable
    if budget <= 0:
        return {}
    targets: dict[str, int] = {}
    ordered = sorted(old_sets, key=lambda rs: rs["metadata"].get("creationTimestamp", ""))
    # 1. replicas of old sets that are not available are removed first
    for rs in ordered:
        if budget <= 0:
            break
        unhealthy = replicas_of(rs) - available_of(rs)
        if unhealthy <= 0:
            continue
        cut = min(budget, unhealthy)
        targets[rs["metadata"]["name"]] = replicas_of(rs) - cut
        budget -= cut
    # 2. then available ones, as far as the deployment stays at minAvailable
    available = sum(available_of(rs) for rs in all_sets)
    allowed = available - min_available
    for rs in ordered:
        if allowed <= 0:
            break
        name = rs["metadata"]["name"]
        current = targets.get(name, replicas_of(rs))
        if current == 0:
            continue
        cut = min(current, allowed, available_of(rs))
        if cut <= 0:
            continue
        targets[name] = current - cut
        allowed -= cut
    return {name: value for name, value in targets.items()}


def deployment_complete(deployment: Obj, status: Obj) -> bool:
    replicas = int(deployment["spec"].get("replicas", 1))
    return (status.get("updatedReplicas") == replicas and status.get("replicas") == replicas
            and status.get("availableReplicas") == replicas
            and status.get("observedGeneration", 0) >= deployment["metadata"].get(
                "generation", 1))
