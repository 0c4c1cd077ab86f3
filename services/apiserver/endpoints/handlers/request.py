"""Reading one HTTP request of the Kubernetes API: its body (JSON, YAML or protobuf, decoded
with decoding.py's bounds), its DeleteOptions, and the query parameters every verb shares
(`dryRun`, `fieldManager`, `resourceVersion`, `includeObject`, integer options), each
refused with kube-apiserver's wording; and the Warning header a write's warnings go out in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from skiff.api import ApiError
from skiff.api.errors import FieldError as ApiFieldError
from skiff.api.objcopy import deep_copy
from skiff.api.schema import prune_unknown_fields
from skiff.api.types import Obj
from skiff.apiserver.endpoints import protobuf
from skiff.apiserver.endpoints.handlers import decoding
from skiff.apiserver.endpoints.handlers import patch as patches
from skiff.apiserver.endpoints.handlers.fieldmanager import apply as field_managers
from skiff.apiserver.endpoints.http import Request

# What a Table row carries (`?includeObject=`): Kubernetes' IncludeObjectPolicy values.
_INCLUDE_OBJECT = ("Metadata", "None", "Object")


def include_object(query: dict[str, str]) -> str:
    include = query.get("includeObject") or "Metadata"
    if include not in _INCLUDE_OBJECT:
        raise ApiError.bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: '
            + ", ".join(f'"{v}"' for v in _INCLUDE_OBJECT))
    return include


def orphan_dependents(options: Obj, q: dict[str, str]) -> bool | None:
    value = options.get("orphanDependents", q.get("orphanDependents"))
    return None if value in (None, "") else value in (True, "true", "1")


def int_param(name: str, value: Any) -> int:
    """An integer query parameter (or DeleteOptions field), 400 as kube-apiserver words a
    value Go's strconv cannot parse."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise decoding.wrong_type("DeleteOptions", f"DeleteOptions.{name}", value, "int64")
    return value if isinstance(value, int) else decoding.go_int(name, value)


def resource_version(q: dict[str, str]) -> int:
    """`?resourceVersion=` of a get, list or watch: etcd revisions are unsigned integers;
    anything else is a 400 naming the value (Go's strconv.ParseUint words)."""
    rv = q.get("resourceVersion", "")
    if rv in ("", "0"):
        return 0
    if not rv.isascii() or not rv.isdigit():
        raise ApiError.bad_request(f'resourceVersion: Invalid value: "{rv}": '
                                   f'strconv.ParseUint: parsing "{rv}": invalid syntax')
    if int(rv) >= 1 << 64:
        raise ApiError.bad_request(f'resourceVersion: Invalid value: "{rv}": '
                                   f'strconv.ParseUint: parsing "{rv}": value out of range')
    return int(rv)


def raised_at(err: BaseException) -> str:
    """file:line where an exception was raised (for a one-line log entry)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""


def decode_ahead(req: Request) -> None:
    """Decode a large JSON/YAML body (run in a thread): `read_body` then reads the result."""
    kind = req.header("content-type")
    if kind.split(";")[0].strip() in ("application/vnd.kubernetes.protobuf",
                                      patches.JSON_PATCH):
        return
    try:
        req.decoded = (decoding.decode_body(req.body, kind), None)
    except ApiError as err:
        req.decoded = (None, err)


def read_body(req: Request, *, kind: str = "") -> Obj:
    """The request body as an object; `kind` (what it should be) words decode errors as
    kube-apiserver does."""
    if not req.body:
        raise ApiError.bad_request("request body: required (a Kubernetes object)")
    content_type = req.header("content-type")
    if content_type.split(";")[0].strip() == "application/vnd.kubernetes.protobuf":
        return protobuf.decode(req.body)
    if req.decoded is not None:
        body, error = req.decoded
        if error is not None and kind and error.message.startswith(
                decoding.DECODE_PROBLEMS):  # decoded before the kind was known
            raise decoding.unrecognized(kind, error.message, req.body)
        if error is not None:
            raise error
    else:
        body = decoding.decode_body(req.body, content_type, kind=kind)
    if not isinstance(body, dict):
        raise ApiError.bad_request("request body must be a JSON object")
    return decoding.object_meta(body, kind) if kind else body


def delete_options(req: Request) -> Obj:
    """The DeleteOptions body of a DELETE (none: {}), each field of its JSON type."""
    return decoding.delete_options(read_body(req, kind="DeleteOptions")) if req.body else {}


def refuse_unknown_patched_fields(
        patched: Obj, unknown_fields: Callable[[Obj], list[str]] = prune_unknown_fields
) -> None:
    """fieldValidation=Strict on PATCH: kube-apiserver answers an Invalid Status about the
    field `patch`, whose value is the patched object (kubectl prints it that way).
    `unknown_fields`: the kind strategy's pruning."""
    unknown = unknown_fields(deep_copy(patched))
    if unknown:
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise ApiError.invalid("", "", [ApiFieldError(
            "patch", "Invalid value", f"strict decoding error: {listed}",
            json.dumps(patched, separators=(",", ":")))])


def dry_run_of(q: dict[str, str], options: Obj | None = None) -> bool:
    """`dryRun=All` (query, or DeleteOptions.dryRun): run everything, store nothing."""
    values = (options or {}).get("dryRun") or ([q["dryRun"]] if q.get("dryRun") else [])
    for value in values:
        if value != "All":
            raise ApiError.bad_request(f'dryRun: Unsupported value: "{value}": supported '
                                       'values: "All"')
    return bool(values)


def manager_of(req: Request) -> str:
    """The field manager of a write: `fieldManager`, or the user agent's product name."""
    return req.query.get("fieldManager") or field_managers.default_manager(
        req.header("user-agent"))


def warning_header(warnings: list[str]) -> dict[str, str]:
    """RFC 7234 Warning header: `299 - "text"`, inner quotes escaped; kubectl prints them."""
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return {"Warning": ", ".join(f"299 - {quoted(w)}" for w in warnings)} if warnings else {}
