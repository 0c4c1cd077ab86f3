"""A custom object against one version of its CRD (SPEC EX3): the public surface the
apiserver's custom-resource strategy calls — `validate_custom_object` (schema values,
embedded resources' apiVersion/kind/metadata, list-type set/map uniqueness, then the CEL
rules), `prune_custom_object` and `default_custom_object` (re-exported from their modules).
Each walks the object once alongside the schema, as kube-apiserver's
`pkg/apiserver/schema/{objectmeta,listtype}` and the OpenAPI validator do."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skiff.api.apiextensions.defaulting import default_custom_object, drop_nulls_without_defaults
from skiff.api.apiextensions.names import kind_problems
from skiff.api.apiextensions.pruning import prune_custom_object
from skiff.api.apiextensions.values import NIL_PATH, TYPE_INVALID, validate_values
from skiff.api.errors import FieldError, duplicate, invalid, required
from skiff.api.objectmeta import validate_metadata
from skiff.api.types import ObjView

__all__ = ["default_custom_object", "drop_nulls_without_defaults", "has_rules",
           "prune_custom_object", "validate_custom_object", "validate_embedded_and_lists"]


def validate_custom_object(schema: ObjView, obj: ObjView, *,
                           old: ObjView | None = None) -> list[FieldError]:
    """All field errors of `obj` against a version's `openAPIV3Schema`: the OpenAPI value
    checks, embedded resources, list types, and the schema's CEL rules (with `oldSelf` from
    `old` on an update). The root's metadata is checked by the generic ObjectMeta rules."""
    errors = validate_values(schema, obj)
    # an update keeps list sets/maps the old object already broke (kube's ratcheting)
    lists = old is None or not validate_embedded_and_lists(schema, old, lists_only=True)
    errors += validate_embedded_and_lists(schema, obj, lists=lists)
    if not any(_blocks_rules(e) for e in errors):
        # CEL's runtime is loaded on first use: most processes never run a rule
        from skiff.api.apiextensions import cel
        errors += cel.validate_rules(schema, obj, old)
    elif has_rules(schema):  # walked only for a refused object
        errors.append(invalid(NIL_PATH, "null", RULES_NOT_CHECKED))
    return errors


def has_rules(schema: ObjView) -> bool:
    """Whether any structural node of the schema carries `x-kubernetes-validations`."""
    if schema.get("x-kubernetes-validations"):
        return True
    properties = schema.get("properties")
    subs = list(properties.values()) if isinstance(properties, Mapping) else []
    subs += [schema.get("items"), schema.get("additionalProperties")]
    return any(isinstance(sub, Mapping) and has_rules(sub) for sub in subs)


RULES_NOT_CHECKED = ("some validation rules were not checked because the object was invalid; "
                     "correct the existing errors to complete validation")
_BLOCKING = ("Unsupported value", "Required value", "Too long", "Too many")


def _blocks_rules(error: FieldError) -> bool:
    """kube's `hasBlockingErr`: errors after which CEL rules are not evaluated."""
    return error.type in _BLOCKING or error.reason == TYPE_INVALID


def validate_embedded_and_lists(schema: ObjView, obj: ObjView, *, lists: bool = True,
                                lists_only: bool = False) -> list[FieldError]:
    """kube's `objectmeta.Validate` (for `x-kubernetes-embedded-resource` below the root) and
    `listtype.ValidateListSetsAndMaps` in one walk (either alone with the flags)."""
    errors: list[FieldError] = []
    _walk(schema, obj, "", errors, root=True, embedded=not lists_only, lists=lists)
    return errors


def _sub_schema(schema: ObjView, key: str) -> ObjView | None:
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
        sub: ObjView = properties[key]
        return sub
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else None


def _walk(schema: ObjView, value: Any, path: str, errors: list[FieldError], *,
          root: bool = False, embedded: bool, lists: bool) -> None:
    if isinstance(value, Mapping):
        if embedded and schema.get("x-kubernetes-embedded-resource") is True and not root:
            errors.extend(_validate_embedded(value, path))
        for key, item in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = _sub_schema(schema, key)
            if sub is not None:
                _walk(sub, item, f"{path}.{key}" if path else key, errors, embedded=embedded,
                      lists=lists)
    elif isinstance(value, list):
        list_type = schema.get("x-kubernetes-list-type") if lists else None
        if list_type == "set":
            errors.extend(duplicate(f"{path}[{i}]", value[i]) for i in _repeats(value))
        elif list_type == "map":
            errors.extend(_list_map_duplicates(schema, value, path))
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _walk(items, item, f"{path}[{i}]", errors, embedded=embedded, lists=lists)


def _repeats(values: list[Any]) -> list[int]:
    """Indices of the second occurrence of each repeated value (kube reports each once)."""
    counts: dict[str, int] = {}
    found = []
    for i, value in enumerate(values):
        key = json.dumps(value, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] == 2:
            found.append(i)
    return found


def _list_map_duplicates(schema: ObjView, value: list[Any], path: str) -> list[FieldError]:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, Mapping):
            return [invalid(f"{path}[{i}]", item, "must be an object for an array of list-type "
                                                  "map")]
    keys = schema.get("x-kubernetes-list-map-keys")
    if len(value) <= 1 or not isinstance(keys, list) or not keys:
        return []
    entry_keys = [{k: item[k] for k in keys if k in item} if item else {} for item in value]
    return [duplicate(f"{path}[{i}]", entry_keys[i]) for i in _repeats(entry_keys)]


def _path_segment_problems(name: str) -> list[str]:
    """apimachinery's `IsPathSegmentName`: what an embedded object's name may not be."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _validate_embedded(value: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if "apiVersion" not in value:
        errors.append(required(f"{path}.apiVersion"))
    if "kind" not in value:
        errors.append(required(f"{path}.kind"))
    api_version, kind = value.get("apiVersion"), value.get("kind")
    if "apiVersion" in value:
        if not isinstance(api_version, str):
            errors.append(invalid(f"{path}.apiVersion", api_version, "must be a string"))
        elif not api_version:
            errors.append(invalid(f"{path}.apiVersion", api_version, "must not be empty"))
        elif api_version.count("/") > 1:
            errors.append(invalid(f"{path}.apiVersion", api_version,
                                  f"unexpected GroupVersion string: {api_version}"))
    if "kind" in value:
        if not isinstance(kind, str):
            errors.append(invalid(f"{path}.kind", kind, "must be a string"))
        elif not kind:
            errors.append(invalid(f"{path}.kind", kind, "must not be empty"))
        else:
            errors += [invalid(f"{path}.kind", kind, p) for p in kind_problems(kind)]
    meta = value.get("metadata")
    if "metadata" in value and meta is not None:
        if not isinstance(meta, Mapping):
            errors.append(invalid(f"{path}.metadata", meta, "must be an object"))
        else:
            errors += validate_metadata(value, kind if isinstance(kind, str) else "",
                                        f"{path}.metadata", namespaced=bool(meta.get("namespace")),
                                        name_check=_path_segment_problems, top_level=False)
    return errors
