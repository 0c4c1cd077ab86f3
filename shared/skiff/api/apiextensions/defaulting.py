"""Defaulting of custom objects (SPEC EX3): a schema's `default` values applied as
kube-apiserver applies them on every decode of a request and of stored data
(`pkg/apiserver/schema/defaulting`): a missing field — or a null one that is not
`nullable` — under properties, array items and additionalProperties gets a deep copy of its
default, then defaulting goes on inside the value. Plus the request-side step before it: a
null field that is neither nullable nor defaulted is dropped."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api.types import Obj, ObjView

__all__ = ["default_custom_object", "drop_nulls_without_defaults"]


def default_custom_object(schema: ObjView, obj: Obj) -> None:
    """Apply the schema's defaults to `obj` in place."""
    _default(obj, schema)


def _non_nullable_null(value: Any, schema: Any) -> bool:
    return value is None and isinstance(schema, Mapping) and schema.get("nullable") is not True


def _default(value: Any, schema: ObjView) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        for key, prop in properties.items():
            if not isinstance(prop, Mapping) or prop.get("default") is None:
                continue
            if key not in value or _non_nullable_null(value[key], prop):
                value[key] = copy.deepcopy(prop["default"])
        additional = schema.get("additionalProperties")
        for key in value:
            prop = properties.get(key)
            if isinstance(prop, Mapping):
                _default(value[key], prop)
            elif isinstance(additional, Mapping):
                if _non_nullable_null(value[key], additional):
                    value[key] = copy.deepcopy(additional.get("default"))
                _default(value[key], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return
        for i, item in enumerate(value):
            if _non_nullable_null(item, items):
                value[i] = copy.deepcopy(items.get("default"))
            _default(value[i], items)


def drop_nulls_without_defaults(schema: ObjView, obj: Obj) -> None:
    """kube's `PruneNonNullableNullsWithoutDefaults`, run on a request body before defaulting:
    a `null` field whose schema is neither nullable nor defaulted is removed."""
    _drop_nulls(obj, schema)


def _field_schema(schema: ObjView | None, key: str) -> ObjView | None:
    if schema is None:
        return None
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
        sub: ObjView = properties[key]
        return sub
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else None


def _drop_nulls(value: Any, schema: ObjView | None) -> None:
    if isinstance(value, dict):
        for key in list(value):
            sub = _field_schema(schema, key)
            if value[key] is None and sub is not None and sub.get("nullable") is not True \
                    and sub.get("default") is None:
                del value[key]
            else:
                _drop_nulls(value[key], sub)
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        for item in value:
            _drop_nulls(item, items if isinstance(items, Mapping) else None)
