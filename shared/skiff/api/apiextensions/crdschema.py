"""The rules a CRD version's `openAPIV3Schema` must follow (SPEC EX1, EX3), with
kube-apiserver's messages and paths: the OpenAPI subset CRDs accept (no `$ref`, no
`uniqueItems`, list/map types...), a *structural* schema (`pkg/apiserver/schema/validation.go`:
a type everywhere outside int-or-string and preserve-unknown-fields, nothing but value checks
under allOf/anyOf/oneOf/not, root metadata restricted to name/generateName), and `default`
values that validate and survive pruning. Pure functions over the schema dict."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.apiextensions.goregex import GoRegexError, compile_go_pattern
from skiff.api.apiextensions.pruning import prune_custom_object
from skiff.api.apiextensions.values import NIL_PATH, validate_values
from skiff.api.errors import FieldError, forbidden, invalid, not_supported, required
from skiff.api.types import ObjView

__all__ = ["validate_version_schema"]

OPENAPI_V3_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
_META_FIELDS = ("metadata", "kind", "apiVersion")
_ROOT_FIELDS_WITH_STATUS = {
    "description": "Description", "type": "Type", "format": "Format", "title": "Title",
    "maximum": "Maximum", "exclusiveMaximum": "ExclusiveMaximum", "minimum": "Minimum",
    "exclusiveMinimum": "ExclusiveMinimum", "maxLength": "MaxLength",
    "minLength": "MinLength", "pattern": "Pattern", "maxItems": "MaxItems",
    "minItems": "MinItems", "uniqueItems": "UniqueItems", "multipleOf": "MultipleOf",
    "required": "Required", "items": "Items", "properties": "Properties",
    "externalDocs": "ExternalDocs", "example": "Example",
    "x-kubernetes-preserve-unknown-fields": "XPreserveUnknownFields",
    "x-kubernetes-validations": "XValidations",
}
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_ATOMIC_IN_SET = "must be atomic as item of a list with x-kubernetes-list-type=set"
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _key(path: str, key: str) -> str:
    return f"{path}.properties[{key}]"


def _props(schema: ObjView) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _dict(value: Any) -> ObjView | None:
    return value if isinstance(value, Mapping) else None


def validate_version_schema(schema: Any, path: str, *, status_enabled: bool) -> list[FieldError]:
    """All errors of one version's `openAPIV3Schema` at `path`
    (`spec.versions[0].schema.openAPIV3Schema`)."""
    if not isinstance(schema, Mapping):
        return [invalid(path, schema, "must be an object")]
    errors: list[FieldError] = []
    if status_enabled:
        errors += _status_root_rules(schema, path)
    if schema.get("nullable") is True:
        errors.append(forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    structural = _structural_errors(schema, path)
    errors += structural
    errors += _openapi_rules(schema, path, _Context(), root=True)
    if not structural and not errors:
        errors += _default_errors(schema, path, inside_meta=False)
    return errors


def _status_root_rules(schema: ObjView, path: str) -> list[FieldError]:
    for key, value in schema.items():
        if value in (None, False, "", [], {}, 0):
            continue
        if key == "type":
            if value != "object":
                return [invalid(f"{path}.type", value, 'only "object" is allowed as the type at '
                                "the root of the schema if the status subresource is enabled")]
            continue
        if key not in _ROOT_FIELDS_WITH_STATUS:
            names = " ".join(dict.fromkeys(_ROOT_FIELDS_WITH_STATUS.values()))
            return [invalid(path, dict(schema), f"only [{names}] fields are allowed at the "
                                                "root of the schema if the status subresource "
                                                "is enabled")]
    return []


# --- the OpenAPI subset CRDs accept (ValidateCustomResourceDefinitionOpenAPISchema) ------

@dataclass(frozen=True)
class _Context:
    allow_defaults: bool = True
    defaults_reason: str = ""
    inside_meta: bool = False


def _openapi_rules(schema: ObjView, path: str, ctx: _Context, *,
                   root: bool = False) -> list[FieldError]:
    errors = _standard_rules(schema, path, ctx)
    if schema.get("uniqueItems") is True:
        errors.append(forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true since "
                                                      "the runtime complexity becomes quadratic"))
    properties = _props(schema)
    if "additionalProperties" in schema and schema["additionalProperties"] is not None:
        additional = schema["additionalProperties"]
        if properties and (additional is False or isinstance(additional, Mapping)):
            errors.append(forbidden(f"{path}.additionalProperties",
                                    "additionalProperties and properties are mutual exclusive"))
        if isinstance(additional, Mapping):
            sub_ctx = ctx
            if ctx.inside_meta:
                sub_ctx = dataclasses.replace(
                    ctx, allow_defaults=False,
                    defaults_reason="inside additionalProperties applying to object metadata")
            errors += _openapi_rules(additional, f"{path}.additionalProperties", sub_ctx)
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    for key, sub in properties.items():
        if not isinstance(sub, Mapping):
            errors.append(invalid(_key(path, key), sub, "must be an object"))
            continue
        sub_ctx = ctx
        if (root or embedded) and key in _META_FIELDS:
            sub_ctx = dataclasses.replace(sub_ctx, inside_meta=True)
            if root:
                sub_ctx = dataclasses.replace(sub_ctx, allow_defaults=False,
                                              defaults_reason=f"in top-level {key}")
        errors += _openapi_rules(sub, _key(path, key), sub_ctx)
    if isinstance(schema.get("not"), Mapping):
        errors += _openapi_rules(schema["not"], f"{path}.not", ctx)
    for junctor in _JUNCTORS:
        for i, sub in enumerate(schema.get(junctor) or []):
            if isinstance(sub, Mapping):
                errors += _openapi_rules(sub, f"{path}.{junctor}[{i}]", ctx)
    items = schema.get("items")
    if isinstance(items, Mapping):
        errors += _openapi_rules(items, f"{path}.items", ctx)
    errors += _extension_rules(schema, path)
    return errors


def _standard_rules(schema: ObjView, path: str, ctx: _Context) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = schema.get("type")
    if kind and kind != "null" and kind not in OPENAPI_V3_TYPES:
        errors.append(not_supported(f"{path}.type", kind, OPENAPI_V3_TYPES))
    if schema.get("default") is not None and not ctx.allow_defaults:
        detail = "must not be set" + (f" {ctx.defaults_reason}" if ctx.defaults_reason else "")
        errors.append(forbidden(f"{path}.default", detail))
    for key, what in (("id", "id"), ("additionalItems", "additionalItems"),
                      ("patternProperties", "patternProperties"),
                      ("definitions", "definitions"), ("dependencies", "dependencies"),
                      ("$ref", "$ref")):
        if schema.get(key):
            errors.append(forbidden(f"{path}.{key}", f"{what} is not supported"))
    if kind == "null":
        errors.append(forbidden(f"{path}.type", "type cannot be set to null, use nullable as an "
                                                "alternative"))
    if isinstance(schema.get("items"), list):
        errors.append(forbidden(f"{path}.items", "items must be a schema object and not an "
                                                 "array"))
    if ctx.inside_meta and schema.get("x-kubernetes-embedded-resource") is True:
        errors.append(forbidden(f"{path}.x-kubernetes-embedded-resource",
                                "must not be used inside of resource meta"))
    return errors


def _type_needed(schema: ObjView, path: str, kind: str, why: str) -> list[FieldError]:
    current = schema.get("type")
    if current == kind:
        return []
    if not current:
        return [required(f"{path}.type", f"must be {kind} if {why}")]
    return [invalid(f"{path}.type", current, f"must be {kind} if {why}")]


def _extension_rules(schema: ObjView, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        errors.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False,
                              "must be true or undefined"))
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None:
        errors += _type_needed(schema, path, "object", "x-kubernetes-map-type is specified")
        if map_type not in ("atomic", "granular"):
            errors.append(not_supported(f"{path}.x-kubernetes-map-type", map_type,
                                        ["atomic", "granular"]))
    list_type = schema.get("x-kubernetes-list-type")
    items = _dict(schema.get("items"))
    if list_type is not None and schema.get("type") != "array":
        errors += _type_needed(schema, path, "array", "x-kubernetes-list-type is specified")
    elif list_type == "set" and items is not None:
        if items.get("type") == "array" and items.get("x-kubernetes-list-type") not in (
                None, "atomic"):
            errors.append(invalid(f"{path}.items.x-kubernetes-list-type",
                                  items.get("x-kubernetes-list-type"),
                                  _ATOMIC_IN_SET))
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errors.append(invalid(f"{path}.items.x-kubernetes-map-type",
                                  items.get("x-kubernetes-list-type"),
                                  _ATOMIC_IN_SET))
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errors.append(not_supported(f"{path}.x-kubernetes-list-type", list_type,
                                    ["atomic", "set", "map"]))
    map_keys = schema.get("x-kubernetes-list-map-keys") or []
    if map_keys:
        if list_type is None:
            errors.append(required(f"{path}.x-kubernetes-list-type",
                                   "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            errors.append(invalid(f"{path}.x-kubernetes-list-type", list_type,
                                  "must be map if x-kubernetes-list-map-keys is non-empty"))
    if list_type == "map":
        errors += _list_map_rules(schema, items, map_keys, path)
    if list_type in ("set", "map") and items is not None:
        errors += _map_set_key_rules(items, list_type, map_keys, path)
    return errors


def _list_map_rules(schema: ObjView, items: ObjView | None, map_keys: list[Any],
                    path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not map_keys:
        errors.append(required(f"{path}.x-kubernetes-list-map-keys",
                               "must not be empty if x-kubernetes-list-type is map"))
    if items is None:
        errors.append(required(f"{path}.items", "must have a schema if x-kubernetes-list-type "
                                                "is map"))
        return errors
    if items.get("type") != "object":
        errors.append(invalid(f"{path}.items.type", items.get("type", ""),
                              "must be object if parent array's x-kubernetes-list-type is map"))
        return errors
    seen: set[str] = set()
    for key in map_keys:
        prop = _dict(_props(items).get(key))
        if prop is None:
            errors.append(invalid(f"{path}.x-kubernetes-list-map-keys", map_keys,
                                  "entries must all be names of item properties"))
        elif prop.get("type") in ("array", "object"):
            errors.append(invalid(f"{path}.items.properties[{key}].type", "object",
                                  "must be a scalar type if parent array's "
                                  "x-kubernetes-list-type is map"))
        if key in seen:
            errors.append(invalid(f"{path}.x-kubernetes-list-map-keys", map_keys,
                                  "must not contain duplicate entries"))
        seen.add(key)
    return errors


def _map_set_key_rules(items: ObjView, list_type: str, map_keys: list[Any],
                       path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if items.get("nullable") is True:
        errors.append(forbidden(f"{path}.items.nullable",
                                f"cannot be nullable when x-kubernetes-list-type is {list_type}"))
    if list_type != "map":
        return errors
    needed = items.get("required") or []
    for key in map_keys:
        prop = _dict(_props(items).get(key))
        if prop is None:
            continue
        where = f"{path}.items.properties[{key}]"
        if key not in needed and prop.get("default") is None:
            errors.append(required(f"{where}.default", "this property is in "
                                   "x-kubernetes-list-map-keys, so it must have a default or be "
                                   "a required property"))
        if prop.get("nullable") is True:
            errors.append(forbidden(f"{where}.nullable", "this property is in "
                                    "x-kubernetes-list-map-keys, so it cannot be nullable"))
    return errors


# --- structural schemas (pkg/apiserver/schema/validation.go, complete.go) --------------

_ROOT, _ITEM, _FIELD = "root", "item", "field"


def _structural_errors(schema: ObjView, path: str) -> list[FieldError]:
    errors = _invariants(schema, _ROOT, path)
    errors += _completeness(schema, schema, path, path)
    return sorted(errors, key=str)


def _is_int_or_string_any_of(junction: Any) -> bool:
    return isinstance(junction, list) and list(junction) == _INT_OR_STRING_ANY_OF


def _invariants(s: ObjView, level: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = s.get("type") or ""
    items = _dict(s.get("items"))
    if kind == "array" and items is None:
        errors.append(required(f"{path}.items", "must be specified"))
    if items is not None:
        errors += _invariants(items, _ITEM, f"{path}.items")
    properties = _props(s)
    for key, sub in properties.items():
        if isinstance(sub, Mapping):
            errors += _invariants(sub, _FIELD, _key(path, key))
    additional = s.get("additionalProperties")
    if additional is not None:
        if level == _ROOT:
            errors.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(additional, Mapping):
            errors += _invariants(additional, _FIELD, f"{path}.additionalProperties")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = s.get("x-kubernetes-embedded-resource") is True
    if int_or_string and preserve:
        errors.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                              "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        errors.append(invalid(f"{path}.x-kubernetes-embedded-resource", True,
                              "must be false if x-kubernetes-int-or-string is true"))
    skip_any_of = _is_int_or_string_any_of(s.get("anyOf"))
    all_of = s.get("allOf")
    skip_first = isinstance(all_of, list) and bool(all_of) and isinstance(all_of[0], Mapping) \
        and _is_int_or_string_any_of(all_of[0].get("anyOf"))
    errors += _value_validation(s, skip_any_of, skip_first, path)
    if embedded and kind != "object":
        errors += _type_needed(s, path, "object", "x-kubernetes-embedded-resource is true")
    elif not kind and not int_or_string and not preserve:
        where = {_ROOT: "at the root", _ITEM: "for specified array items",
                 _FIELD: "for specified object fields"}[level]
        errors.append(required(f"{path}.type", f"must not be empty {where}"))
    if embedded and additional is not None:
        errors.append(forbidden(f"{path}.additionalProperties",
                                "must not be used if x-kubernetes-embedded-resource is set"))
    if level == _ROOT and kind and kind != "object":
        errors.append(invalid(f"{path}.type", kind, "must be object at the root"))
    check_meta = level == _ROOT or embedded
    for name in ("kind", "apiVersion"):
        sub = _dict(properties.get(name))
        if check_meta and sub is not None and sub.get("type") != "string":
            errors.append(invalid(f"{_key(path, name)}.type", sub.get("type", ""),
                                  "must be string"))
    meta = _dict(properties.get("metadata"))
    if meta is not None:
        errors += _metadata_invariants(meta, check_meta, level, _key(path, "metadata"))
    if embedded and not preserve and not properties:
        errors.append(required(f"{path}.properties", "must not be empty if "
                               "x-kubernetes-embedded-resource is true without "
                               "x-kubernetes-preserve-unknown-fields"))
    return errors


def _metadata_invariants(meta: ObjView, check_meta: bool, level: str,
                         path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if check_meta and meta.get("type") != "object":
        errors.append(invalid(f"{path}.type", meta.get("type", ""), "must be object"))
    if level == _ROOT:
        extra = [k for k, v in meta.items() if k not in ("type", "default", "properties")
                 and v not in (None, False, "", [], {})]
        names = set(_props(meta))
        if extra or not names <= {"name", "generateName"}:
            errors.append(forbidden(path, "must not specify anything other than name and "
                                          "generateName, but metadata is implicitly specified"))
    return errors


_NESTED_FORBIDDEN = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("externalDocs", "must be undefined to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
)


def _value_validation(v: ObjView, skip_any_of: bool, skip_first_all_of_any_of: bool,
                      path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for junctor in ("anyOf", "allOf", "oneOf"):
        if junctor == "anyOf" and skip_any_of:
            continue
        for i, sub in enumerate(v.get(junctor) or []):
            if isinstance(sub, Mapping):
                skip = junctor == "allOf" and i == 0 and skip_first_all_of_any_of
                errors += _nested(sub, skip, f"{path}.{junctor}[{i}]")
    if isinstance(v.get("not"), Mapping):
        errors += _nested(v["not"], False, f"{path}.not")
    pattern = v.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            compile_go_pattern(pattern)
        except GoRegexError as err:
            errors.append(invalid(f"{path}.pattern", pattern,
                                  f"must be a valid regular expression, but isn't: {err}"))
    return errors


def _nested(v: ObjView, skip_any_of: bool, path: str) -> list[FieldError]:
    errors = _value_validation(v, skip_any_of, False, path)
    if isinstance(v.get("items"), Mapping):
        errors += _nested(v["items"], False, f"{path}.items")
    for key, sub in _props(v).items():
        if isinstance(sub, Mapping):
            errors += _nested(sub, False, _key(path, key))
    for key, detail in _NESTED_FORBIDDEN:
        if v.get(key) not in (None, False, "", []):
            errors.append(forbidden(f"{path}.{key}", detail))
    if "metadata" in _props(v):
        errors.append(forbidden(_key(path, "metadata"), "must not be specified in a nested "
                                                        "context"))
    return errors


def _completeness(v: ObjView, s: ObjView | None, s_path: str, v_path: str) -> list[FieldError]:
    """Every property or items a value validation names is also in the structural part."""
    errors: list[FieldError] = []
    subs = [(v["not"], f"{v_path}.not")] if isinstance(v.get("not"), Mapping) else []
    for junctor in ("allOf", "anyOf", "oneOf"):
        subs += [(sub, f"{v_path}.{junctor}[{i}]")
                 for i, sub in enumerate(v.get(junctor) or []) if isinstance(sub, Mapping)]
    for sub, sub_path in subs:
        errors += _nested_completeness(sub, s, s_path, sub_path)
    return errors


def _nested_completeness(v: ObjView, s: ObjView | None, s_path: str,
                         v_path: str) -> list[FieldError]:
    if s is None:
        return [required(s_path, f"because it is defined in {v_path}")]
    errors = _completeness(v, s, s_path, v_path)
    if isinstance(v.get("items"), Mapping):
        errors += _nested_completeness(v["items"], _dict(s.get("items")), f"{s_path}.items",
                                       f"{v_path}.items")
    s_props = _props(s)
    for key, sub in _props(v).items():
        if not isinstance(sub, Mapping):
            continue
        if key not in s_props:
            errors.append(required(_key(s_path, key),
                                   f"because it is defined in {_key(v_path, key)}"))
        else:
            errors += _nested_completeness(sub, _dict(s_props[key]), _key(s_path, key),
                                           _key(v_path, key))
    return errors


# --- defaults (pkg/apiserver/schema/defaulting/validation.go) ---------------------------

def _default_errors(s: ObjView, path: str, *, inside_meta: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    default = s.get("default")
    where = f"{path}.default"
    if default is not None and not inside_meta:
        pruned = copy.deepcopy(default)
        embedded = s.get("x-kubernetes-embedded-resource") is True
        if embedded and isinstance(pruned, dict):
            dropped = prune_custom_object(s, pruned)
        else:
            dropped = _prune_value(s, pruned)
        if dropped:
            errors.append(invalid(where, default, "must not have unknown fields"))
        errors += [dataclasses.replace(e, path=_under(where, e.path))
                   for e in validate_values(s, default)]
    items = _dict(s.get("items"))
    if items is not None:
        errors += _default_errors(items, f"{path}.items", inside_meta=inside_meta)
    embedded = s.get("x-kubernetes-embedded-resource") is True
    for key, sub in _props(s).items():
        if isinstance(sub, Mapping):
            errors += _default_errors(sub, _key(path, key),
                                      inside_meta=inside_meta or (embedded and key in _META_FIELDS))
    return errors


def _prune_value(s: ObjView, value: Any) -> list[str]:
    wrapper: dict[str, Any] = {"v": value}
    return prune_custom_object({"properties": {"v": s}}, wrapper)


def _under(prefix: str, path: str) -> str:
    if path in ("", NIL_PATH):
        return prefix
    return f"{prefix}.{path}"

