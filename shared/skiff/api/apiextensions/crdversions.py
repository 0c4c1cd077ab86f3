"""Reading a CustomResourceDefinition's versions: which one is stored, which are served,
and each version's schema, subresources, printer columns and selectable fields (v1 keeps
them per version)."""

from __future__ import annotations

from typing import Any

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
