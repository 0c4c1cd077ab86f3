"""Request bodies decoded the way kube-apiserver decodes them, with its bounds (SPEC AU10).

A body is untrusted input: a 400-byte YAML document can expand, through aliases, into
millions of nodes, and a few kilobytes of brackets nest deeper than any decoder's stack.
kube-apiserver refuses both before building the object (go-yaml: "document contains
excessive aliasing", "exceeded max depth of 10000"; Go's JSON scanner: "exceeded max
depth"), and answers a field of the wrong JSON type with a 400 that names the field and the
Go type it should have had. This module does the same for both fronts, without building
the expanded object and without recursion, so neither the event loop nor the log pays for
a hostile body. Objects that pass these bounds but still nest deeper than Python's own
recursion allows are refused with a 400 too (`RecursionError` is a client error here).
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

import yaml

from skiff.api import ApiError
from skiff.api.types import Obj

# Kubernetes' bound on nesting (Go's encoding/json maxNestingDepth, go-yaml's max depth).
MAX_DEPTH = 10_000
# go-yaml's alias budget: up to 400,000 decoded nodes, 99% may come from alias expansion;
# from 4,000,000 on, 10%; in between the share falls linearly.
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000
# A body over this size is decoded off the event loop (kubeapi).
LARGE_BODY = 64 * 1024
TOO_DEEP = ("the object is nested more deeply than this apiserver can process; "
            "flatten it")

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
# '[' and '{' open a level (+1), ']' and '}' close one (-1, stored as the signed byte 255)
_LEVEL = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def summarize(body: bytes, limit: int = 30) -> str:
    """The start of a body as kube-apiserver quotes it in a decode error: JSON as text,
    anything else as hex, cut after `limit` bytes."""
    if not body:
        return "<empty>"
    head = body[:limit]
    text = (head.decode("utf-8", "replace") if body[:1] == b"{" else head.hex())
    return text + (" ..." if len(body) > limit else "")


# How decode problems (as opposed to other 400s) begin: `unrecognized` words them for a kind.
DECODE_PROBLEMS = ("yaml: ", "couldn't get version/kind")


def unrecognized(kind: str, problem: str, body: bytes) -> ApiError:
    """kube-apiserver's 400 for a body it could not decode into `kind`."""
    if not kind:
        return ApiError.bad_request(problem)
    return ApiError.bad_request(f"the object provided is unrecognized (must be of type "
                                f"{kind}): {problem} ({summarize(body)})")


def json_depth(body: bytes) -> tuple[int, str]:
    """The deepest nesting of a JSON text, and the bracket that first went past MAX_DEPTH
    (strings skipped; malformed text is left to the JSON decoder)."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0, ""
    levels = array("b", brackets.translate(_LEVEL))
    deepest = max(accumulate(levels))
    if deepest <= MAX_DEPTH:
        return deepest, ""
    at = next(i for i, level in enumerate(accumulate(levels)) if level > MAX_DEPTH)
    return deepest, chr(brackets[at])


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    share = (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)
    return 0.99 - 0.89 * share


def check_yaml(body: bytes) -> None:
    """Refuse (ValueError, go-yaml's message) a YAML document nested deeper than MAX_DEPTH
    or whose aliases would expand it past go-yaml's budget, from the parser's events alone:
    the size an alias expands to is counted, never built."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = decoded = aliased = 0
    sizes: dict[str, int] = {}  # anchor -> nodes its value decodes to
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, `decoded` when it opened)
    try:
        events = list(yaml.parse(body, Loader=loader))
    except yaml.YAMLError as err:
        if "nesting depth" in str(err):  # libyaml's own bound (1,000 levels)
            raise ValueError("yaml: exceeded max depth") from None
        raise
    for event in events:
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"yaml: exceeded max depth of {MAX_DEPTH}")
            open_nodes.append((event.anchor, decoded))
            decoded += 1
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
            anchor, opened = open_nodes.pop()
            if anchor:
                sizes[anchor] = decoded - opened
        elif isinstance(event, yaml.ScalarEvent):
            decoded += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            size = sizes.get(event.anchor or "")
            if size is None:
                continue  # an unknown anchor: the decoder says so
            decoded += 1 + size
            aliased += size
            if (aliased > 100 and decoded > 1000
                    and aliased / decoded > _allowed_alias_ratio(decoded)):
                raise ValueError("yaml: document contains excessive aliasing")


def decode_body(body: bytes, content_type: str, *, kind: str = "") -> Any:
    """A JSON or YAML request body as Python values, or ApiError 400 in kube-apiserver's
    words (`kind`, when known, is what the body should be)."""
    if "yaml" in content_type:
        try:
            check_yaml(body)
            return yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except ValueError as err:
            raise unrecognized(kind, str(err), body) from None
        except RecursionError:
            raise ApiError.bad_request(TOO_DEEP) from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ApiError.bad_request(f"request body is not valid YAML{where}") from None
    _, bracket = json_depth(body)
    if bracket:
        raise unrecognized(kind, f"couldn't get version/kind; json parse error: invalid "
                                 f"character '{bracket}' exceeded max depth", body)
    try:
        return json.loads(body)
    except RecursionError:
        raise ApiError.bad_request(TOO_DEEP) from None
    except json.JSONDecodeError as err:
        raise ApiError.bad_request(f"request body is not valid JSON (line {err.lineno}, "
                                   f"column {err.colno}: {err.msg.lower()})") from None
    except ValueError:  # not UTF-8
        raise ApiError.bad_request("request body is not valid JSON (not UTF-8 text); "
                                   f"send {content_type or 'application/json'} as UTF-8"
                                   ) from None


_GO_INT = re.compile(r"[+-]?[0-9]+\Z")


def go_int(name: str, text: str) -> int:
    """An integer parameter parsed as Go's strconv.ParseInt(text, 10, 64) parses it (no
    spaces, underscores or non-ASCII digits, which Python's int() takes), or a 400 naming
    the parameter in strconv's words."""
    quoted = json.dumps(text, ensure_ascii=False)
    if not _GO_INT.match(text):
        raise ApiError.bad_request(f"{name}: strconv.ParseInt: parsing {quoted}: invalid "
                                   "syntax")
    value = int(text)
    if not -(1 << 63) <= value < 1 << 63:
        raise ApiError.bad_request(f"{name}: strconv.ParseInt: parsing {quoted}: value out "
                                   "of range")
    return value


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as Go's decoder names it in errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "binary data" if isinstance(value, bytes | bytearray) else "value"


def wrong_type(kind: str, field: str, value: Any, go_type: str, *,
               version: str = "v1") -> ApiError:
    """kube-apiserver's 400 for a body field of the wrong JSON type."""
    return ApiError.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot '
        f"unmarshal {json_type(value)} into Go struct field {field} of type {go_type}")


_DELETE_FIELDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "gracePeriodSeconds": (int, "int64"),
    "preconditions": (dict, "v1.Preconditions"),
    "orphanDependents": (bool, "bool"),
    "propagationPolicy": (str, "v1.DeletionPropagation"),
    "dryRun": (list, "[]string"),
}


def delete_options(options: Any) -> Obj:
    """DeleteOptions with each field's JSON type checked (400 as kube-apiserver words it)."""
    if not isinstance(options, dict):
        raise wrong_type("DeleteOptions", "DeleteOptions", options, "v1.DeleteOptions")
    for name, (kinds, go_type) in _DELETE_FIELDS.items():
        value = options.get(name)
        if value is None:
            continue
        if not isinstance(value, kinds) or (kinds is int and isinstance(value, bool)):
            raise wrong_type("DeleteOptions", f"DeleteOptions.{name}", value, go_type)
    for key in ("uid", "resourceVersion"):
        value = (options.get("preconditions") or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise wrong_type("DeleteOptions", f"Preconditions.preconditions.{key}", value,
                             "types.UID" if key == "uid" else "string")
    for item in options.get("dryRun") or []:
        if not isinstance(item, str):
            raise wrong_type("DeleteOptions", "DeleteOptions.dryRun", item, "string")
    return options


def binding(body: Any) -> Obj:
    """A Binding (pods/binding) whose `target` is an ObjectReference map."""
    if not isinstance(body, dict):
        raise wrong_type("Binding", "Binding", body, "v1.Binding")
    target = body.get("target")
    if target is not None and not isinstance(target, dict):
        raise wrong_type("Binding", "Binding.target", target, "v1.ObjectReference")
    for key, value in (target or {}).items():
        if not isinstance(value, str) and key != "fieldPath":
            raise wrong_type("Binding", f"ObjectReference.target.{key}", value,
                             "types.UID" if key == "uid" else "string")
    return body


def reject_binary(obj: Any, where: str = "object") -> None:
    """A gRPC (msgpack) object holds only what JSON can hold: msgpack binary values have no
    JSON form (Kubernetes carries bytes as base64 strings), so they are a 400 here rather
    than a failure deep in the registry."""
    if _json_only(obj):  # the usual case, without a path string for every field
        return
    pending: list[tuple[str, Any]] = [(where, obj)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, bytes | bytearray):
            raise ApiError.bad_request(
                f"{path}: Invalid value: binary data: must be a string (base64 for "
                "Secret data), as in the object's JSON form")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ApiError.bad_request(f"{path}: Invalid value: map keys must be "
                                               "strings, as in the object's JSON form")
                pending.append((f"{path}.{key}", item))
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}[{i}]", item) for i, item in enumerate(value))


def _json_only(obj: Any) -> bool:
    """Whether `obj` holds no binary value and no map key that is not a string."""
    pending = [obj]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value):
                return False
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
        elif isinstance(value, bytes | bytearray):
            return False
    return True


_META_STRINGS = ("name", "generateName", "namespace", "resourceVersion", "uid")


def object_meta(obj: Obj, kind: str) -> Obj:
    """An object whose `metadata` has the JSON types ObjectMeta's Go struct takes: a map,
    string names and versions, string-to-string labels and annotations (400 otherwise, as
    kube-apiserver's decoder answers, before any validation reads them)."""
    api_version = obj.get("apiVersion")
    version = api_version.rpartition("/")[2] if isinstance(api_version, str) else "v1"
    meta = obj.get("metadata")
    if meta is None:
        return obj
    if not isinstance(meta, dict):
        raise wrong_type(kind, f"{kind}.metadata", meta, "v1.ObjectMeta", version=version)
    for key in _META_STRINGS:
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise wrong_type(kind, f"ObjectMeta.metadata.{key}", value,
                             "types.UID" if key == "uid" else "string", version=version)
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise wrong_type(kind, f"ObjectMeta.metadata.{key}", value, "map[string]string",
                             version=version)
        for item in value.values():
            if not isinstance(item, str):
                raise wrong_type(kind, f"ObjectMeta.metadata.{key}", item, "string",
                                 version=version)
    return obj
