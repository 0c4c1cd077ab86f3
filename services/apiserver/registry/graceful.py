"""Graceful deletion in the apiserver (SPEC GT1–GT3), as pure functions.

Kubernetes' `BeforeDelete` + the pod strategy's `CheckGracefulDelete`: which grace period a
DELETE gets, whether it marks the object (deletionTimestamp + deletionGracePeriodSeconds)
or removes it from etcd now, and the rule that a later DELETE may only shorten the period.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.api.validation import MAX_GRACE_SECONDS
from skiff.clock import parse_rfc3339, rfc3339

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30


def pod_grace_period(pod: Obj, requested: int | None) -> int:
    """GT1: request's gracePeriodSeconds, else the spec's (30); 0 when unscheduled or
    terminal; a negative period becomes 1, a longer one than a deadline can hold is capped."""
    spec = pod.get("spec", {})
    if requested is not None:
        period = int(requested)
    else:
        period = int(spec.get("terminationGracePeriodSeconds",
                              DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS))
    if not spec.get("nodeName"):
        period = 0
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    if period < 0:
        period = 1
    # an object stored before validation capped it must still be deletable
    return min(period, MAX_GRACE_SECONDS)


class Action(enum.Enum):
    DELETE_NOW = "delete"  # remove the key from etcd now (GT3 force, or not graceful)
    MARK = "mark"  # write the returned object with deletionTimestamp set (GT2)
    UNCHANGED = "unchanged"  # already terminating with a period at most this long


@dataclass(frozen=True)
class Decision:
    action: Action
    obj: Obj


def later_delete_period(requested: int | None) -> int | None:
    """The period a DELETE asks of an object already being deleted: only the request's
    own gracePeriodSeconds counts (None: it named none); a negative one becomes 1."""
    if requested is None:
        return None
    return max(int(requested), 1) if requested < 0 else int(requested)


def decide(obj: Obj, period: int | None, now: float) -> Decision:
    """Apply a DELETE with `period` to the stored object (GT2, GT3, finalizers).

    For an object already being deleted (Kubernetes' `BeforeDelete`): `period` None (the
    DELETE named no gracePeriodSeconds) changes nothing; a period that is not shorter
    changes nothing; a shorter one keeps the original start, so the new deletionTimestamp
    is (old deletionTimestamp − old period) + new period. A deletion with no period left
    (0 or unset) is finished at once unless finalizers hold it."""
    meta = obj.get("metadata", {})
    finalizers = meta.get("finalizers") or []
    existing = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        if existing is None or int(existing) == 0:
            if finalizers:
                return Decision(Action.UNCHANGED, obj)
            return Decision(Action.DELETE_NOW, obj)
        if period is None or period >= int(existing):
            return Decision(Action.UNCHANGED, obj)  # GT2: pending, never lengthened
        if period == 0 and not finalizers:
            return Decision(Action.DELETE_NOW, obj)
        marked = deep_copy(obj)
        started = parse_rfc3339(meta["deletionTimestamp"]) - int(existing)
        marked["metadata"]["deletionTimestamp"] = rfc3339(started + period)
        marked["metadata"]["deletionGracePeriodSeconds"] = period
        return Decision(Action.MARK, marked)
    period = period or 0
    if period == 0 and not finalizers:
        return Decision(Action.DELETE_NOW, obj)
    marked = deep_copy(obj)
    marked["metadata"]["deletionTimestamp"] = rfc3339(now + period)
    marked["metadata"]["deletionGracePeriodSeconds"] = period
    return Decision(Action.MARK, marked)


def finished_finalizing(obj: Obj) -> bool:
    """An object marked for deletion whose last finalizer is gone and whose grace is over."""
    meta = obj.get("metadata", {})
    if obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"):
        return False  # the namespace controller has not emptied it yet
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") and (
        int(meta.get("deletionGracePeriodSeconds") or 0) == 0)


def mark_namespace_terminating(obj: Obj, now: float) -> Obj | None:
    """A DELETE of a namespace with `spec.finalizers` marks it Terminating (the namespace
    controller deletes its content, then the `kubernetes` finalizer); None otherwise."""
    if obj.get("kind") != "Namespace" or not (obj.get("spec") or {}).get("finalizers"):
        return None
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return obj
    marked = deep_copy(obj)
    marked["metadata"]["deletionTimestamp"] = rfc3339(now)
    marked["metadata"]["deletionGracePeriodSeconds"] = 0
    marked.setdefault("status", {})["phase"] = "Terminating"
    return marked
