"""Small questions every component asks about a pod (or any object) dict.

Kept here so the scheduler, the kubelet and the controllers answer "is it terminating?"
or "what is its key?" the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.types import ObjView
from skiff.clock import rfc3339

TERMINAL_PHASES = ("Succeeded", "Failed")


def _meta(obj: ObjView) -> ObjView:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def pod_key(obj: ObjView) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (`cache.MetaNamespaceKeyFunc`)."""
    meta = _meta(obj)
    namespace, name = meta.get("namespace"), meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def is_terminating(pod: ObjView) -> bool:
    """A delete has been requested: `metadata.deletionTimestamp` is set."""
    return bool(_meta(pod).get("deletionTimestamp"))


def is_pod_terminal(pod: ObjView) -> bool:
    """The pod's phase is Succeeded or Failed; it will never run again."""
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def set_condition(obj: dict[str, Any], condition_type: str, status: str, *, now: float,
                  reason: str = "", message: str = "") -> bool:
    """Set a condition on `obj` (a copy the caller owns); True when something changed."""
    conditions: list[dict[str, Any]] = obj.setdefault("status", {}).setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") != condition_type:
            continue
        before = dict(cond)
        if cond.get("status") != status:
            cond["lastTransitionTime"] = rfc3339(now)
        cond["status"] = status
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond != before
    new: dict[str, Any] = {"type": condition_type, "status": status, "lastProbeTime": None,
                "lastTransitionTime": rfc3339(now)}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    conditions.append(new)
    return True


def get_condition(pod: ObjView, condition_type: str) -> dict[str, Any] | None:
    """The `status.conditions` entry of `condition_type`, or None."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return None
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == condition_type:
            return condition
    return None


def tolerates(toleration: ObjView, taint: ObjView) -> bool:
    """`Toleration.ToleratesTaint`: effect, key and (for Equal) value must match."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if not key:
        return False  # an empty key needs the Exists operator
    return (toleration.get("value") or "") == (taint.get("value") or "")
