"""RFC 6902 JSON patch bodies (`application/json-patch+json`), applied by the `jsonpatch`
library. `kubectl rollout undo` and `kubectl patch --type=json` send them; a failed `test`
or a path that does not exist is a clear 422/400 that names the operation."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer

from skiff.api import ApiError, Reason

Obj = dict[str, Any]


def json_patch_operations(body: bytes) -> list[Obj]:
    try:
        ops = json.loads(body or b"[]")
    except ValueError:
        raise ApiError.bad_request("the JSON patch body is not valid JSON") from None
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise ApiError.bad_request("a JSON patch is a list of operations "
                                   '({"op": ..., "path": ...})')
    return ops


def apply_json_patch(current: Obj, ops: list[Obj]) -> Obj:
    try:
        patched = jsonpatch.JsonPatch(copy.deepcopy(ops)).apply(copy.deepcopy(current))
    except jsonpatch.JsonPatchTestFailed as err:
        raise ApiError(Reason.INVALID, f"the JSON patch test operation failed: {err}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
        raise ApiError.bad_request(f"the JSON patch cannot be applied: {err}") from None
    if not isinstance(patched, dict):
        raise ApiError.bad_request("the JSON patch must leave an object")
    return patched
