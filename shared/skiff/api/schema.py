"""The known fields of each kind, for `fieldValidation=Warn|Strict` (SPEC AS1).

Kubernetes drops fields its OpenAPI schema does not know and warns about each one; a
real manifest prunes to nothing. Each kind's schema is its API group's
(`skiff.api.groups`), written in the language of `skiff.api.fieldschema`; this module
prunes an object against the one of its kind and version.
"""

from __future__ import annotations

from typing import Any

from skiff.api.catalog import SCHEMAS, VERSION_SCHEMAS
from skiff.api.fieldschema import Field, ListOf, _AnyType

# SCHEMAS and the schema language are read by the apiserver's OpenAPI document
__all__ = ["SCHEMAS", "VERSION_SCHEMAS", "ListOf", "_AnyType", "known_kind",
           "prune_unknown_fields"]


def _prune(value: Any, schema: Field, path: str, unknown: list[str]) -> None:
    if isinstance(schema, ListOf):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _prune(item, schema.item, f"{path}[{i}]", unknown)
        return
    if isinstance(schema, _AnyType) or not isinstance(value, dict):
        return
    for key in list(value):
        child = f"{path}.{key}" if path else str(key)
        if key not in schema:
            del value[key]
            unknown.append(child)
        else:
            _prune(value[key], schema[key], child, unknown)


def prune_unknown_fields(obj: dict[str, Any]) -> list[str]:
    """Drop the fields `obj`'s kind (in its apiVersion) does not have and return their
    paths, in order.

    Objects of kinds without a schema here are left alone.
    """
    kind = obj.get("kind")
    version = obj.get("apiVersion")
    schema = None
    if isinstance(kind, str):
        schema = (VERSION_SCHEMAS.get((version, kind)) if isinstance(version, str)
                  else None) or SCHEMAS.get(kind)
    unknown: list[str] = []
    if schema is not None:
        _prune(obj, schema, "", unknown)
    return unknown


def known_kind(kind: str) -> bool:
    return kind in SCHEMAS
