"""The CustomResourceDefinition's strategy (SPEC EX1), as apiextensions-apiserver's
`pkg/registry/customresourcedefinition` has it: a created CRD starts with an empty status
whose `storedVersions` names its storage version (and an update adds a new storage version
there), and a DELETE of a CRD that is served takes the `customresourcecleanup` finalizer,
so its objects are deleted (by the CRD controller) before it goes.
"""

from __future__ import annotations

from typing import Any

from skiff.api.apiextensions.crd import stored_versions_after_update
from skiff.api.types import Obj, ObjView
from skiff.apiserver.registry.strategy import Strategy

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def _storage_versions(crd: ObjView) -> list[str]:
    versions = (crd.get("spec") or {}).get("versions") or []
    return [str(v.get("name")) for v in versions
            if isinstance(v, dict) and v.get("storage") is True]


def _conditions(crd: ObjView) -> list[Any]:
    return list((crd.get("status") or {}).get("conditions") or [])


def established(crd: ObjView) -> bool:
    return any(isinstance(c, dict) and c.get("type") == "Established"
               and c.get("status") == "True" for c in _conditions(crd))


class CrdStrategy(Strategy):
    """CustomResourceDefinitions."""

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"storedVersions": _storage_versions(obj)}

    def prepare_for_update(self, old: Obj, new: Obj, *, subresource: str) -> None:
        if subresource == "":  # a status write may prune storedVersions (after a migration)
            new.setdefault("status", {})["storedVersions"] = stored_versions_after_update(
                new, old)

    def finalizers_on_delete(self, current: Obj) -> list[str]:
        return [CLEANUP_FINALIZER] if established(current) else []
