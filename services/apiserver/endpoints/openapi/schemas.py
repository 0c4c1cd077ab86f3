"""OpenAPI v2 and v3 documents for every kind Skiff serves (SPEC AX5).

The schemas are Kubernetes' own, as the PyPI package `kubernetes-validate` ships them for
v1.32 (JSON Schema draft 2020-12 converted from kube-apiserver's OpenAPI, descriptions and
`x-kubernetes-*` extensions kept). This module turns them back into OpenAPI: `$defs`
references become `#/definitions/...` (v2) or `#/components/schemas/...` (v3), nullable type
lists become one type, and each served kind gets its `x-kubernetes-group-version-kind`, which
`kubectl explain` looks for. Skiff's own kinds (Fence) get a schema written from Skiff's field
table. The strategic merge patch and server-side apply read list merge keys and patch
strategies from the same schemas (`field_schema`).

The 1.3 MB definitions file is read once (about 1 s and 25 MiB on the CI machine), in a
background thread when the Kubernetes front starts (`warm`).
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from importlib import resources
from typing import Any

from skiff.api.kinds import KINDS, KindInfo
from skiff.api.schema import SCHEMAS, ListOf, _AnyType
from skiff.api.types import Obj, ObjView

KUBERNETES_SCHEMA_VERSION = "v1.32.0"
_SKIFF_PREFIX = "io.skiff.api"


@functools.cache
def _definitions() -> dict[str, Obj]:
    """Kubernetes' definitions by name (`io.k8s.api.core.v1.Pod`), as OpenAPI schemas with
    `#/definitions/` references; Skiff's own kinds added."""
    path = resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/{KUBERNETES_SCHEMA_VERSION}-local/_definitions.json")
    raw = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    defs = {name: _to_openapi(schema) for name, schema in raw.items()}
    for info in KINDS:
        if _find_kind(defs, info) is None:
            defs[f"{_SKIFF_PREFIX}.{info.version}.{info.kind}"] = _skiff_kind_schema(info)
    for info in (served for kind in KINDS for served in kind.served()):
        name = _find_kind(defs, info)
        if name is not None:
            defs[name]["x-kubernetes-group-version-kind"] = [
                {"group": info.group, "version": info.version, "kind": info.kind}]
    return defs


def _to_openapi(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_to_openapi(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: Obj = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = value.replace("#/$defs/", "#/definitions/")
        elif key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) == 1:
                out[key] = kinds[0]
        elif key in ("oneOf", "anyOf") and isinstance(value, list):
            # int-or-string is written `oneOf: [string, integer]` in JSON Schema
            types = {str(v.get("type")) for v in _to_openapi(value) if isinstance(v, dict)}
            out.update({"type": "string", "format": "int-or-string"}
                       if {"string", "integer"} <= types else {key: _to_openapi(value)})
        elif key == "enum" and isinstance(value, list) and len(value) == 1:
            continue  # apiVersion/kind pinned by the converter; not in Kubernetes' OpenAPI
        elif key == "additionalProperties" and value is False:
            continue
        elif key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {k: _to_openapi(v) for k, v in value.items()}
        else:
            out[key] = _to_openapi(value)
    return out


def _find_kind(defs: dict[str, Obj], info: KindInfo) -> str | None:
    """The definition of a served kind: Kubernetes' `io.k8s.api.<pkg>.<version>.<Kind>`."""
    suffix = f".{info.version}.{info.kind}"
    package = info.group.split(".")[0] if info.group else "core"
    for name in (f"io.k8s.api.{package}{suffix}", f"{_SKIFF_PREFIX}{suffix}"):
        if name in defs:
            return name
    return None


def _skiff_kind_schema(info: KindInfo) -> Obj:
    """A schema for one of Skiff's own kinds, from the field table that prunes them."""
    def convert(field: Any) -> Obj:
        if isinstance(field, _AnyType):
            return {"x-kubernetes-preserve-unknown-fields": True}
        if isinstance(field, ListOf):
            return {"type": "array", "items": convert(field.item)}
        return {"type": "object", "properties": {k: convert(v) for k, v in field.items()}}

    schema = convert(SCHEMAS[info.kind])
    props = schema["properties"]
    props["metadata"] = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1."
                                 "ObjectMeta", "description": "Standard object's metadata."}
    for top in ("apiVersion", "kind"):
        props[top] = {"type": "string", "description": f"{top} of this Skiff object."}
    schema["description"] = f"{info.kind} is one of Skiff's own kinds ({info.api_version})."
    return schema


# Custom resources' definitions (SPEC EX4), by definition name, while their CRDs are
# served; the CRD controller sets them (`set_custom_schema`).
_CUSTOM: dict[str, Obj] = {}


def custom_definition_name(info: KindInfo) -> str:
    """kube-apiserver's name for a custom resource's definition: the group reversed, then
    version and kind (`com.example.stable.v1.CronTab`)."""
    return ".".join([*reversed(info.group.split(".")), info.version, info.kind])


def set_custom_schema(info: KindInfo, schema: ObjView | None) -> None:
    """Publish (or, None, withdraw) a custom resource version's OpenAPI definition, built
    from its CRD's `openAPIV3Schema` as kube-apiserver builds it."""
    name = custom_definition_name(info)
    if schema is None:
        _CUSTOM.pop(name, None)
    else:
        definition = copy.deepcopy(dict(schema))
        definition.setdefault("type", "object")
        props = definition.setdefault("properties", {})
        props["metadata"] = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1."
                                     "ObjectMeta",
                             "description": "Standard object's metadata. More info: https://"
                                            "git.k8s.io/community/contributors/devel/sig-"
                                            "architecture/api-conventions.md#metadata"}
        props["apiVersion"] = {"type": "string", "description": (
            "APIVersion defines the versioned schema of this representation of an object.")}
        props["kind"] = {"type": "string", "description": (
            "Kind is a string value representing the REST resource this object represents.")}
        definition["x-kubernetes-group-version-kind"] = [
            {"group": info.group, "version": info.version, "kind": info.kind}]
        _CUSTOM[name] = definition
    _MERGED.clear()
    field_schema.cache_clear()


_MERGED: list[dict[str, Obj]] = []  # the built-in and custom definitions, made once


def _all_definitions() -> dict[str, Obj]:
    if not _CUSTOM:
        return _definitions()
    if not _MERGED:
        _MERGED.append({**_definitions(), **_CUSTOM})
    return _MERGED[0]


def kind_definition(info: KindInfo) -> str | None:
    if info.custom:
        name = custom_definition_name(info)
        return name if name in _CUSTOM else None
    return _find_kind(_definitions(), info)


_WARM_LOCK = threading.Lock()


def warm() -> None:
    """Read the definitions now (about 1 s and 25 MiB), so the first patch does not wait.
    Both fronts call it in a thread at start; the lock makes the second one wait for the
    first's copy instead of reading its own."""
    with _WARM_LOCK:
        _definitions()


@functools.lru_cache(maxsize=4096)
def field_schema(kind: str, path: tuple[str, ...]) -> Obj | None:
    """The schema of a field of a served kind (`("spec", "containers")`), references
    resolved; None when the schema does not know the field. Cached: do not mutate."""
    info = next((k for k in KINDS if k.kind == kind), None)
    name = kind_definition(info) if info else next(
        (n for n, d in _CUSTOM.items()
         if any(g.get("kind") == kind for g in d["x-kubernetes-group-version-kind"])), None)
    if name is None:
        return None
    schema: Obj | None = resolve(_all_definitions()[name])
    for step in path:
        if schema is None:
            return None
        if step == "[]":
            schema = resolve(schema.get("items") or {})
        else:
            schema = resolve((schema.get("properties") or {}).get(step) or {}) or None
    return schema


def resolve(schema: Obj) -> Obj:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _all_definitions().get(ref.rsplit("/", 1)[-1], {})
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged
    return schema


def _needed(roots: list[str]) -> list[str]:
    """Every definition reachable from `roots`."""
    defs, seen, todo = _all_definitions(), set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        todo.extend(_refs(defs[name]))
    return sorted(seen)


def _refs(schema: Any) -> list[str]:
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.append(value.rsplit("/", 1)[-1])
            else:
                found.extend(_refs(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_refs(value))
    return found


_COMMON = ["io.k8s.apimachinery.pkg.apis.meta.v1.Status",
           "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
           "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"]


# The patch types every served kind takes (Skiff applies strategic merge patches to all of
# them); kubectl reads `application/strategic-merge-patch+json` here before it computes a
# client-side apply or diff from the v3 schema.
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json",
                "application/merge-patch+json", "application/strategic-merge-patch+json")
_PATCH_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"


def _request_body(op: Obj, ref: str, *, v3: bool, types: tuple[str, ...]) -> None:
    """A write's body as kube-apiserver describes it: v3 `requestBody` with one content per
    media type, v2 `consumes` and a `body` parameter."""
    name = ref.rsplit("/", 1)[-1]
    if v3:
        schema = {"$ref": f"#/components/schemas/{name}"}
        op["requestBody"] = {"content": {t: {"schema": schema} for t in types},
                             "required": True}
        return
    op["consumes"] = sorted(types, key=lambda t: t == "application/apply-patch+yaml")
    op["parameters"] = [{"name": "body", "in": "body", "required": True,
                         "schema": {"$ref": f"#/definitions/{name}"}}, *op["parameters"]]


def _paths(group_version: str, kinds: list[KindInfo], *, v3: bool) -> Obj:
    group, _, version = group_version.rpartition("/")
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    paths: Obj = {}
    for info in kinds:
        gvk = {"group": group, "version": version, "kind": info.kind}
        definition = kind_definition(info)
        ref = (f"#/components/schemas/{definition}" if v3 else f"#/definitions/{definition}")
        body = ({"content": {"application/json": {"schema": {"$ref": ref}}}} if v3
                else {"schema": {"$ref": ref}})
        prefix = f"{root}/namespaces/{{namespace}}" if info.namespaced else root
        validation: Obj = {"name": "fieldValidation", "in": "query", "type": "string",
                      "description": "fieldValidation instructs the server on how to handle "
                                     "objects in the request containing unknown or "
                                     "duplicate fields."}
        if v3:
            validation = {k: v for k, v in validation.items() if k != "type"}
            validation["schema"] = {"type": "string", "uniqueItems": True}
        ok = {"description": "OK", **body}

        def operation(action: str, op_id: str, *, gvk: Obj = gvk, ok: Obj = ok,
                      validation: Obj = validation, ref: str = ref) -> Obj:
            op: Obj = {"operationId": op_id, "x-kubernetes-action": action,
                       "x-kubernetes-group-version-kind": gvk,
                       "parameters": [validation] if action in ("post", "put", "patch")
                       else [],
                       "responses": {"200": ok}}
            if action in ("post", "put", "patch"):
                _request_body(op, ref if action != "patch" else _PATCH_REF, v3=v3,
                              types=_PATCH_TYPES if action == "patch" else ("*/*",))
            return op

        plural = info.kind
        paths[f"{prefix}/{info.resource}/{{name}}"] = {
            "get": operation("get", f"read{plural}"),
            "put": operation("put", f"replace{plural}"),
            "patch": operation("patch", f"patch{plural}"),
            "delete": operation("delete", f"delete{plural}")}
        paths[f"{prefix}/{info.resource}"] = {
            "get": operation("list", f"list{plural}"),
            "post": operation("post", f"create{plural}"),
            "delete": operation("deletecollection", f"deleteCollection{plural}")}
    return paths


def v3_document(group_version: str, kinds: list[KindInfo], server_version: str) -> Obj:
    """`/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`."""
    names = _needed([n for n in (kind_definition(k) for k in kinds) if n] + _COMMON)
    defs = _all_definitions()
    schemas = {n: _rebase(copy.deepcopy(defs[n]), "#/components/schemas/") for n in names}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": server_version},
            "paths": _paths(group_version, kinds, v3=True),
            "components": {"schemas": schemas}}


def v2_document(by_group_version: dict[str, list[KindInfo]], server_version: str) -> Obj:
    """`/openapi/v2` as JSON (Swagger 2.0), every served kind."""
    paths: Obj = {}
    roots: list[str] = list(_COMMON)
    for gv, kinds in by_group_version.items():
        paths.update(_paths(gv, kinds, v3=False))
        roots.extend(n for n in (kind_definition(k) for k in kinds) if n)
    defs = _all_definitions()
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": server_version},
            "paths": paths, "definitions": {n: defs[n] for n in _needed(roots)}}


def _rebase(schema: Any, prefix: str) -> Any:
    if isinstance(schema, dict):
        return {k: (prefix + v.rsplit("/", 1)[-1] if k == "$ref" and isinstance(v, str)
                    else _rebase(v, prefix)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_rebase(v, prefix) for v in schema]
    return schema
