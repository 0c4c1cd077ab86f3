"""PATCH bodies as kube-apiserver applies them (SPEC AX1): JSON patch, merge patch and
strategic merge patch.

- JSON patch (RFC 6902, `application/json-patch+json`) is the `jsonpatch` library's.
- Merge patch (RFC 7386) replaces lists and merges maps.
- Strategic merge patch reads each list's `x-kubernetes-patch-strategy` and
  `x-kubernetes-patch-merge-key` from Kubernetes' schema (`endpoints.openapi.schemas`):
  containers merge by `name`, finalizers merge as a set, tolerations (atomic) are replaced.
  It honours the directives kubectl sends: `$patch: delete|replace|merge` on maps and list
  items, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>` and `$retainKeys`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

from skiff.api import ApiError, Reason
from skiff.api.mergepatch import merge_patch as merge_patch  # patches.merge_patch (RFC 7386)
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.apiserver.endpoints.openapi import schemas as openapi

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)


def apply_json_patch(current: Obj, body: bytes) -> Obj:
    """RFC 6902 operations on `current`; a failed `test` or a missing path is a 422 as
    kube-apiserver words it."""
    try:
        operations = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        raise ApiError.bad_request("the JSON patch is not valid JSON") from None
    if not isinstance(operations, list):
        raise ApiError.bad_request("json: cannot unmarshal object into Go value of type "
                                   "jsonpatch.Patch")
    patched: Any = deep_copy(current)
    for operation in operations:  # one at a time, so an error names its operation
        op = operation.get("op") if isinstance(operation, dict) else None
        path = operation.get("path") if isinstance(operation, dict) else None
        try:
            patched = jsonpatch.JsonPatch([operation]).apply(patched, in_place=True)
        except jsonpatch.JsonPatchTestFailed:
            # evanphx/json-patch's words; the library's name Python types
            raise _unprocessable(f"testing value {path} failed: test failed") from None
        except jsonpatch.InvalidJsonPatch:
            raise _unprocessable(f"invalid JSON patch operation {op!r} at {path!r}: an "
                                 "operation needs `op` (add, remove, replace, move, copy, "
                                 "test), `path` and, for add/replace/test, `value`") from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
            raise _unprocessable(f'{op} operation does not apply: doc is missing path: '
                                 f'"{path}": missing value') from None
    if not isinstance(patched, dict):
        raise ApiError.bad_request("the JSON patch replaced the whole object with a "
                                   "non-object")
    return patched


def _unprocessable(message: str) -> ApiError:
    return ApiError(Reason.INVALID, message)


def strategic_merge_patch(kind: str, target: Obj, patch: Obj) -> Obj:
    """Kubernetes' strategic merge patch for a served kind (schema-driven)."""
    merged = _merge_map(target, patch, kind, ())
    return merged if isinstance(merged, dict) else {}


_DELETE = object()


def _merge_map(target: Any, patch: Obj, kind: str, path: tuple[str, ...]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives(patch)
    result = deep_copy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        for key in list(result):
            if key not in retain:
                result.pop(key)
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
            continue
        if key.startswith("$"):
            continue
        child = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, kind, child)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, kind, child)
        else:
            result[key] = value
    for key, order in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(order, list):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list):
                result[name] = _reorder(result[name], order,
                                        _merge_key(kind, (*path, name)))
    return result


def _merge_key(kind: str, path: tuple[str, ...]) -> str | None:
    schema = openapi.field_schema(kind, path)
    if not schema or "merge" not in str(schema.get("x-kubernetes-patch-strategy", "")):
        return None
    return str(schema.get("x-kubernetes-patch-merge-key") or "") or ""


def _merge_list(target: Any, patch: list[Any], kind: str, path: tuple[str, ...]) -> Any:
    key = _merge_key(kind, path)
    current = deep_copy(target) if isinstance(target, list) else []
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip_directives(v) for v in patch
                if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    if key is None:
        return [_strip_directives(v) for v in patch]
    if key == "":  # a set of primitives (finalizers)
        return current + [v for v in patch if v not in current]
    item_path = (*path, "[]")
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise ApiError.bad_request(f"{'.'.join(path)}: every item of a strategic merge "
                                       f"patch list needs its merge key {key!r}")
        index = next((i for i, v in enumerate(current)
                      if isinstance(v, dict) and v.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                current.pop(index)
            continue
        if index is None:
            current.append(_strip_directives(item))
        else:
            current[index] = _merge_map(current[index], item, kind, item_path)
    return current


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(v: Any) -> Any:
        return json.dumps(v.get(key) if key and isinstance(v, dict) else v, sort_keys=True)

    rank = {ident(o): i for i, o in enumerate(order)}
    return sorted(items, key=lambda v: rank.get(ident(v), len(rank)))


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
