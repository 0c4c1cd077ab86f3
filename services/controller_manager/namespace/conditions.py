"""The conditions a Terminating namespace shows (kube's namespace deleter keeps five: one per
way deletion can fail or stall), computed from what one pass of the controller left behind.

Each is True with a reason and message while it applies, else False with the "ok" reason
and message kube writes. What remains is named `<plural>.<group>` (`pods.` for the core
group, `crontabs.stable.example.com`), the finalizers holding objects by name, both sorted
so that an unchanged state rewrites nothing.
"""

from __future__ import annotations

from typing import Any

from skiff.api.types import Obj

CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

# type -> (ok reason, ok message), in kube's order
_OK: dict[str, tuple[str, str]] = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered",
                                          "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentRemoved", "All content successfully removed"),
}


def deletion_conditions(old: list[Any], *, remaining: dict[str, int],
                        finalizers: dict[str, int], now: str) -> list[Obj] | None:
    """The namespace's conditions after a pass that left `remaining` objects (by
    `<plural>.<group>`) held by `finalizers` (by finalizer); None when nothing changed.
    Conditions of other types are kept; a transition stamps `now`."""
    failing: dict[str, tuple[str, str]] = {}
    if any(remaining.values()):
        failing[CONTENT_REMAINING] = ("SomeResourcesRemain", "Some resources are remaining: "
                                      + ", ".join(sorted(f"{r} has {n} resource instances"
                                                         for r, n in remaining.items() if n)))
    if any(finalizers.values()):
        failing[FINALIZERS_REMAINING] = (
            "SomeFinalizerRemain", "Some finalizers are remaining: "
            + ", ".join(sorted(f"{f} in {n} resource instances"
                               for f, n in finalizers.items() if n)))
    conditions = [dict(c) for c in old if isinstance(c, dict)]
    changed = False
    for kind, ok in _OK.items():
        status, (reason, message) = ("True", failing[kind]) if kind in failing else (
            "False", ok)
        current = next((c for c in conditions if c.get("type") == kind), None)
        if current is None:
            conditions.append({"type": kind, "status": status, "lastTransitionTime": now,
                               "reason": reason, "message": message})
            changed = True
        elif (current.get("status"), current.get("reason"), current.get("message")) != (
                status, reason, message):
            if current.get("status") != status:
                current["lastTransitionTime"] = now
            current.update(status=status, reason=reason, message=message)
            changed = True
    return conditions if changed else None
