"""Reading a CustomResourceDefinition's versions: which one is stored, which are served,
and each version's schema, subresources, printer columns and selectable fields (v1 keeps
them per version); and the `KindInfo`s a served CRD adds to the kind table (the apiserver's
CRD controller registers them, and so does every process that follows CRDs)."""

from __future__ import annotations

from typing import Any

from skiff.api.kinds import KindInfo
from skiff.api.types import ObjView


def _versions(crd: ObjView) -> list[ObjView]:
    versions = (crd.get("spec") or {}).get("versions") or []
    return [v for v in versions if isinstance(v, dict)]


def storage_version(crd: ObjView) -> str:
    """The version objects are stored in (the first if, invalidly, none is marked)."""
    versions = _versions(crd)
    for version in versions:
        if version.get("storage") is True:
            return str(version.get("name", ""))
    return str(versions[0].get("name", "")) if versions else ""


def served_versions(crd: ObjView) -> list[str]:
    return [str(v.get("name", "")) for v in _versions(crd) if v.get("served") is True]


def version_entry(crd: ObjView, version: str) -> ObjView | None:
    return next((v for v in _versions(crd) if v.get("name") == version), None)


def schema_of(crd: ObjView, version: str) -> ObjView | None:
    """The version's `openAPIV3Schema`."""
    entry = version_entry(crd, version) or {}
    schema = (entry.get("schema") or {}).get("openAPIV3Schema")
    return schema if isinstance(schema, dict) else None


def subresources_of(crd: ObjView, version: str) -> ObjView:
    entry = version_entry(crd, version) or {}
    subresources = entry.get("subresources")
    return subresources if isinstance(subresources, dict) else {}


def printer_columns_of(crd: ObjView, version: str) -> list[Any]:
    entry = version_entry(crd, version) or {}
    return [c for c in entry.get("additionalPrinterColumns") or [] if isinstance(c, dict)]


def selectable_fields_of(crd: ObjView, version: str) -> list[str]:
    """The JSON paths of the version's `selectableFields`."""
    entry = version_entry(crd, version) or {}
    return [str(f.get("jsonPath", "")) for f in entry.get("selectableFields") or []
            if isinstance(f, dict)]


def kind_infos(crd: ObjView) -> tuple[KindInfo, list[KindInfo]]:
    """The stored version's KindInfo and those of every served version (stored first)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    storage = storage_version(crd)

    def info(version: str) -> KindInfo:
        subresources = subresources_of(crd, version) or {}
        return KindInfo(
            str(names.get("kind", "")), f"{group}/{version}", str(names.get("plural", "")),
            spec.get("scope") == "Namespaced", tuple(names.get("shortNames") or ()),
            has_status="status" in subresources, custom=True,
            categories=tuple(names.get("categories") or ()),
            subresources=tuple(s for s in ("status", "scale") if s in subresources))

    served = served_versions(crd)
    ordered = [storage, *(v for v in served if v != storage)]
    return info(storage), [info(v) for v in ordered if v in served]
