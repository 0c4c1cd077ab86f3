"""Pruning of unknown fields (SPEC EX3): what kube-apiserver drops from a custom object
before it is stored (`pkg/apiserver/schema/pruning`), returning the dropped fields' paths
(`spec.foo`, `spec.items[0].bar`) so the store can warn `unknown field "spec.foo"` or refuse
them under `fieldValidation=Strict`. `x-kubernetes-preserve-unknown-fields` keeps a
subtree (still pruning the properties it specifies), an embedded resource keeps its
apiVersion/kind and its metadata is cut to ObjectMeta's fields."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skiff.api.types import Obj, ObjView

__all__ = ["OBJECT_META_FIELDS", "prune_custom_object"]

_META_FIELDS = frozenset(("apiVersion", "kind", "metadata"))
OBJECT_META_FIELDS = frozenset((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
))


def prune_custom_object(schema: ObjView, obj: Obj) -> list[str]:
    """Drop every field of `obj` its schema does not specify, in place; return their paths,
    sorted. The root's apiVersion, kind and metadata are always kept."""
    dropped: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        # an open root keeps unknown fields; the fields it specifies are still pruned inside
        properties = _properties(schema)
        for key in list(obj):
            sub = properties.get(key)
            if key not in _META_FIELDS and isinstance(sub, Mapping):
                _prune(obj[key], sub, key, dropped)
    else:
        _prune_object_fields(obj, schema, "", dropped, embedded=True, root=True)
    dropped.sort()
    return dropped


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _properties(schema: ObjView | None) -> Mapping[str, Any]:
    properties = schema.get("properties") if schema is not None else None
    return properties if isinstance(properties, Mapping) else {}


def _additional(schema: ObjView | None) -> tuple[bool, ObjView | None]:
    """Whether the schema has additionalProperties, and its schema (None for a bool)."""
    if schema is None or "additionalProperties" not in schema:
        return False, None
    additional = schema["additionalProperties"]
    if additional is None:
        return False, None
    return True, additional if isinstance(additional, Mapping) else None


def _prune(value: Any, schema: ObjView | None, path: str, dropped: list[str]) -> None:
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields") is True:
        _prune_known(value, schema, path, dropped)
        return
    if isinstance(value, dict):
        if schema is None:
            dropped.extend(_join(path, key) for key in value)
            value.clear()
            return
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        _prune_object_fields(value, schema, path, dropped, embedded=embedded, root=False)
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        item_schema = items if isinstance(items, Mapping) else None
        for i, item in enumerate(value):
            _prune(item, item_schema, f"{path}[{i}]", dropped)


def _prune_object_fields(value: dict[str, Any], schema: ObjView, path: str,
                         dropped: list[str], *, embedded: bool, root: bool) -> None:
    properties = _properties(schema)
    has_additional, additional = _additional(schema)
    for key in list(value):
        if embedded and key in _META_FIELDS:
            if key == "metadata" and not root:
                _prune_metadata(value[key], _join(path, key), dropped)
            continue
        if key in properties:
            sub = properties[key]
            _prune(value[key], sub if isinstance(sub, Mapping) else None, _join(path, key),
                   dropped)
        elif has_additional:
            _prune(value[key], additional, _join(path, key), dropped)
        else:
            dropped.append(_join(path, key))
            del value[key]


def _prune_known(value: Any, schema: ObjView, path: str, dropped: list[str]) -> None:
    """Below `x-kubernetes-preserve-unknown-fields`: keep unknown fields, prune known ones."""
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    if isinstance(value, dict):
        properties = _properties(schema)
        has_additional, additional = _additional(schema)
        for key in list(value):
            if embedded and key in _META_FIELDS:
                if key == "metadata":
                    _prune_metadata(value[key], _join(path, key), dropped)
                continue
            if key in properties:
                sub = properties[key]
                _prune(value[key], sub if isinstance(sub, Mapping) else None,
                       _join(path, key), dropped)
            elif has_additional:
                _prune(value[key], additional, _join(path, key), dropped)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _prune_known(item, items, f"{path}[{i}]", dropped)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values())


def _is_list_of(value: Any, kind: type) -> bool:
    return isinstance(value, list) and all(isinstance(v, kind) for v in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# What each ObjectMeta field must hold to survive kube's round trip through metav1.ObjectMeta
# (malformed ones are dropped, as kube's coercion with dropInvalidFields does).
_META_FIELD_OK: dict[str, Callable[[Any], bool]] = {
    "name": lambda v: isinstance(v, str), "generateName": lambda v: isinstance(v, str),
    "namespace": lambda v: isinstance(v, str), "selfLink": lambda v: isinstance(v, str),
    "uid": lambda v: isinstance(v, str), "resourceVersion": lambda v: isinstance(v, str),
    "generation": _is_int, "deletionGracePeriodSeconds": _is_int,
    "creationTimestamp": lambda v: isinstance(v, str),
    "deletionTimestamp": lambda v: isinstance(v, str),
    "labels": _is_str_map, "annotations": _is_str_map,
    "finalizers": lambda v: _is_list_of(v, str),
    "ownerReferences": lambda v: _is_list_of(v, Mapping),
    "managedFields": lambda v: _is_list_of(v, Mapping),
}


def _prune_metadata(meta: Any, path: str, dropped: list[str]) -> None:
    """An embedded resource's metadata as it comes back from metav1.ObjectMeta: unknown
    fields dropped (and reported), malformed and empty ones dropped silently."""
    if not isinstance(meta, dict):
        return
    for key in list(meta):
        if key not in OBJECT_META_FIELDS:
            dropped.append(_join(path, key))
            del meta[key]
        elif meta[key] in (None, "", 0, {}, []) or not _META_FIELD_OK[key](meta[key]):
            del meta[key]
