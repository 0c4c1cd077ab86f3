"""Owner references and deletion propagation (Kubernetes' garbage collection contract).

`kubectl delete --cascade=background|foreground|orphan` sends `propagationPolicy`
Background / Foreground / Orphan. Background deletes the owner now and leaves its dependents
to the garbage collector; Foreground and Orphan keep the owner, marked for deletion, behind a
finalizer (`foregroundDeletion` / `orphan`) that the garbage collector removes once the
dependents are gone (foreground) or no longer point at the owner (orphan). The apiserver adds
the finalizer here; the collector in the controller-manager does the rest.
"""

from __future__ import annotations

import copy

from skiff.api.errors import ApiError, not_supported
from skiff.api.types import Obj

ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
POLICIES = ("Background", "Foreground", "Orphan")


def propagation_finalizer(policy: str | None, *, orphan_dependents: bool | None = None
                          ) -> str | None:
    """The finalizer a DELETE with this `propagationPolicy` (or legacy `orphanDependents`)
    adds; None for Background or no policy. An unknown policy is a 400 naming the field."""
    if policy in (None, ""):
        return ORPHAN_FINALIZER if orphan_dependents else None
    if policy not in POLICIES:
        raise ApiError.invalid("DeleteOptions", "", [
            not_supported("propagationPolicy", policy, list(POLICIES))])
    return {"Foreground": FOREGROUND_FINALIZER, "Orphan": ORPHAN_FINALIZER}.get(policy)


def with_propagation_finalizer(obj: Obj, finalizer: str | None) -> Obj:
    """`obj` with the propagation finalizer (the other one replaced); `obj` itself when it
    already has it or none is wanted."""
    if finalizer is None:
        return obj
    finalizers = list(obj.get("metadata", {}).get("finalizers") or [])
    if finalizer in finalizers:
        return obj
    other = ORPHAN_FINALIZER if finalizer == FOREGROUND_FINALIZER else FOREGROUND_FINALIZER
    updated = copy.deepcopy(obj)
    updated["metadata"]["finalizers"] = [f for f in finalizers if f != other] + [finalizer]
    return updated


def owner_uids(obj: Obj) -> list[str]:
    return [str(ref["uid"]) for ref in obj.get("metadata", {}).get("ownerReferences") or []
            if isinstance(ref, dict) and ref.get("uid")]


def has_finalizer(obj: Obj, finalizer: str) -> bool:
    return finalizer in (obj.get("metadata", {}).get("finalizers") or [])
