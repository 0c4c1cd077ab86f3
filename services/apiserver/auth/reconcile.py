"""Bootstrap policy reconciliation at start: the missing default roles and bindings are
created and the existing ones brought up to date, as kube-apiserver's RBAC post-start hook
does (bootstrappolicy.py holds the data).
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.auth.bootstrappolicy import (
    AGGREGATED_ROLES,
    AUTOUPDATE_ANNOTATION,
    bootstrap_policy,
)

if TYPE_CHECKING:
    from skiff.apiserver.registry.store import Registry


log = logging.getLogger(__name__)

def reconciled(current: Obj, wanted: Obj) -> Obj | None:
    """`current` brought up to date with the bootstrap object `wanted`, or None when it
    already is or its owner opted out (`rbac.authorization.kubernetes.io/autoupdate:
    "false"`), as kube-apiserver reconciles its bootstrap policy at start: wanted labels,
    annotations, rules and subjects are added, none are removed, except that the rules of
    the aggregated roles (admin, edit, view) are replaced whole, as Kubernetes' aggregation
    controller recomputes them."""
    meta = current.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE_ANNOTATION) == "false":
        return None
    updated = copy.deepcopy(current)
    new_meta = updated["metadata"]
    for key in ("labels", "annotations"):
        new_meta[key] = {**(meta.get(key) or {}), **wanted["metadata"][key]}
    name = wanted["metadata"]["name"]
    if wanted["kind"] == "ClusterRole":
        have = list(current.get("rules") or [])
        updated["rules"] = (copy.deepcopy(wanted["rules"]) if name in AGGREGATED_ROLES
                            else have + [r for r in wanted["rules"] if r not in have])
    else:
        have = list(current.get("subjects") or [])
        updated["subjects"] = have + [s for s in wanted["subjects"] if s not in have]
    return None if updated == current else updated


async def reconcile_bootstrap_policy(registry: Registry) -> None:
    """Create the bootstrap policy's missing objects and reconcile the existing ones
    (`reconciled`), so a restarted apiserver corrects roles an older Skiff wrote."""
    for wanted in bootstrap_policy():
        resource = "clusterroles" if wanted["kind"] == "ClusterRole" else "clusterrolebindings"
        for _ in range(5):  # another apiserver process may reconcile at the same time
            try:
                current = await registry.get(resource, None, wanted["metadata"]["name"])
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
                await registry.ensure(wanted)  # created as wanted (or by another apiserver)
                break
            updated = reconciled(current, wanted)
            if updated is None:
                break
            try:
                await registry.update(resource, None, updated)
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
                continue
            log.info("reconciled bootstrap RBAC object",
                     extra={"kind": wanted["kind"], "object": wanted["metadata"]["name"]})
            break
