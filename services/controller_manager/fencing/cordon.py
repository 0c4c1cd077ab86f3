"""Keeping a fenced node out of service until it is unfenced (SPEC FN3), as pure functions.

Once a Fence is confirmed the node is cordoned — `spec.unschedulable` and the taint
`skiff.io/fenced:NoExecute` — so nothing is scheduled onto it and nothing may keep running
there if it returns. Node lifecycle only manages its own taints, so the cordon survives the
node coming back Ready. When the Fence object is gone (unfenced) the cordon is lifted; the
node is marked unschedulable-by-fencing only if it was schedulable before, so a cordon an
administrator set is left alone. The unfencing time is recorded on the node: it restarts
the fencing delay, so a node still booting after unfencing is not fenced again at once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api.types import Obj
from skiff.api.wellknown import CORDONED_BY_FENCING_ANNOTATION as CORDONED_ANNOTATION
from skiff.api.wellknown import TAINT_FENCED, UNFENCED_AT_ANNOTATION
from skiff.clock import rfc3339
from skiff.controller_manager.podutil import NO_EXECUTE, has_taint, taints_of


def is_cordoned_by_fencing(node: Mapping[str, Any]) -> bool:
    return has_taint(node, TAINT_FENCED, NO_EXECUTE)


def cordoned(node: Mapping[str, Any], *, now: float) -> Obj | None:
    """A copy of `node` cordoned for fencing, or None if it already is."""
    spec = node.get("spec") or {}
    if is_cordoned_by_fencing(node) and spec.get("unschedulable"):
        return None
    updated: Obj = copy.deepcopy(dict(node))
    new_spec = updated.setdefault("spec", {})
    if not new_spec.get("unschedulable"):
        new_spec["unschedulable"] = True
        updated["metadata"].setdefault("annotations", {})[CORDONED_ANNOTATION] = "true"
    if not is_cordoned_by_fencing(node):
        new_spec["taints"] = [*taints_of(updated),
                              {"key": TAINT_FENCED, "effect": NO_EXECUTE,
                               "timeAdded": rfc3339(now)}]
    return updated


def uncordoned(node: Mapping[str, Any], *, now: float) -> Obj | None:
    """A copy of `node` with the fencing cordon lifted, or None if there is none."""
    if not is_cordoned_by_fencing(node):
        return None
    updated: Obj = copy.deepcopy(dict(node))
    spec = updated.setdefault("spec", {})
    spec["taints"] = [t for t in taints_of(updated) if t.get("key") != TAINT_FENCED]
    annotations = updated["metadata"].setdefault("annotations", {})
    if annotations.pop(CORDONED_ANNOTATION, None) is not None:
        spec["unschedulable"] = False
    annotations[UNFENCED_AT_ANNOTATION] = rfc3339(now)
    return updated
