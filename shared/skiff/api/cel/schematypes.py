"""How a value under an OpenAPI v3 schema looks to a CEL rule (Kubernetes'
`SchemaDeclType` and `UnstructuredToVal`): `self`'s declared type at a schema node, the
value converted by its schema (integers are int, numbers double, `date-time`/`date`
strings timestamps, `duration` strings durations, `byte` strings bytes, property names
escaped as `__dash__`...), and a rule's `fieldPath` checked and normalised against the
schema.

Objects are CEL maps (string to dyn) rather than Kubernetes' generated object types, so a
field the schema does not declare is a run-time `no such key`, not a compile error.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from functools import lru_cache
from typing import Any

from skiff.api.cel.env import duration, timestamp
from skiff.api.types import ObjView

# CEL's reserved words: a property so named is `__<name>__` in a rule.
_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while",
})
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"),
            ("/", "__slash__"))


@lru_cache(maxsize=4096)
def escape(name: str) -> str | None:
    """A property name as a rule spells it, or None when no rule can name it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    out = []
    i = 0
    while i < len(name):
        for raw, escaped in _ESCAPES:
            if name.startswith(raw, i):
                out.append(escaped)
                i += len(raw)
                break
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def cel_type(node: ObjView) -> str | None:
    """`self`'s declared type at this schema node (a type name of `skiff.api.cel`), or
    None where Kubernetes allows no rule (no type and not int-or-string)."""
    if node.get("x-kubernetes-int-or-string"):
        return "dyn"
    kind = node.get("type") or ""
    if node.get("x-kubernetes-embedded-resource") and not kind:
        return "map"
    if kind == "object":
        return "map"
    if kind == "array":
        return "list"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "double"
    if kind == "boolean":
        return "bool"
    if kind == "string":
        return {"byte": "bytes", "duration": "duration", "date": "timestamp",
                "date-time": "timestamp"}.get(str(node.get("format") or ""), "string")
    return None


_FITS: dict[str, tuple[type, ...]] = {
    "int": (int,), "double": (int, float), "bool": (bool,), "string": (str,),
    "list": (list,), "map": (dict,),
}


def fits(kind: str, value: Any) -> bool:
    """Whether a JSON value is of the schema's CEL type (a rule is not run on a value the
    schema check already refused: Kubernetes runs none then)."""
    if kind in ("int", "double") and isinstance(value, bool):
        return False
    if kind in ("bytes", "timestamp", "duration"):
        return isinstance(value, str)
    return isinstance(value, _FITS.get(kind, (object,)))


def zero_value(kind: str) -> Any:
    """A value of the CEL type `kind`, standing in where a variable has none."""
    return {"int": 0, "double": 0.0, "bool": False, "string": "", "bytes": b"", "list": [],
            "map": {}, "timestamp": timestamp(datetime.datetime(1970, 1, 1)),
            "duration": duration(datetime.timedelta(0))}.get(kind)


def to_cel_value(node: ObjView, value: Any, *, resource_root: bool = False) -> Any:
    """`value` as a rule at `node` sees it (see the module's docstring)."""
    if value is None:
        return None
    if node.get("x-kubernetes-int-or-string"):
        return value
    kind = node.get("type") or ""
    if isinstance(value, dict):
        return _object(node, value, resource_root or bool(
            node.get("x-kubernetes-embedded-resource")))
    if isinstance(value, list):
        items = node.get("items")
        item_node = items if isinstance(items, dict) else {}
        return [to_cel_value(item_node, v, resource_root=bool(
            item_node.get("x-kubernetes-embedded-resource"))) for v in value]
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "string" and isinstance(value, str):
        return _formatted(str(node.get("format") or ""), value)
    return value


def _object(node: ObjView, value: dict[str, Any], resource_root: bool) -> dict[str, Any]:
    props = node.get("properties")
    extra = node.get("additionalProperties")
    out: dict[str, Any] = {}
    if isinstance(props, dict) and props:
        for key, item in value.items():
            sub = props.get(key)
            if isinstance(sub, dict):
                name = escape(key)
                if name is not None:
                    out[name] = to_cel_value(sub, item)
            else:
                out[key] = item
    elif isinstance(extra, dict):
        out = {key: to_cel_value(extra, item) for key, item in value.items()}
    else:
        out = dict(value)
    if resource_root and isinstance(out.get("metadata"), dict):
        # a resource's metadata shows only name and generateName, as in Kubernetes
        meta = out["metadata"]
        out["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return out


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                   "h": 3600.0}


def parse_duration(text: str) -> datetime.timedelta | None:
    """A Go duration (`1h30m`, `-2.5s`), or None."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    pos, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(body):
        if match.start() != pos:
            return None
        seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(body):
        return None
    return datetime.timedelta(seconds=sign * seconds)


def _formatted(fmt: str, value: str) -> Any:
    if fmt == "date-time":
        try:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        return timestamp(parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC))
    if fmt == "date":
        try:
            day = datetime.date.fromisoformat(value)
        except ValueError:
            return value
        return timestamp(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC))
    if fmt == "duration":
        parsed_duration = parse_duration(value)
        return value if parsed_duration is None else duration(parsed_duration)
    if fmt == "byte":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
    return value


_PATH_TOKEN = re.compile(r"'(?:\\.|[^'\\])*'|[.\[\]]|[^.\[\]']+")


def normalize_field_path(path: str, node: ObjView) -> str:
    """A rule's `fieldPath` (`.spec.x`, `.labels['a.b']`) as the field path an error
    names (`spec.x`, `labels[a.b]`); raises ValueError when the schema has no such field."""
    tokens = _PATH_TOKEN.findall(path)
    if "".join(tokens) != path:
        raise ValueError("invalid path")
    out = ""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == ".":
            if i + 1 >= len(tokens):
                raise ValueError("unexpected end of JSON path")
            name, i = tokens[i + 1], i + 2
        elif tok == "[":
            if i + 2 >= len(tokens) or tokens[i + 2] != "]":
                raise ValueError("unexpected end of JSON path")
            quoted = tokens[i + 1]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                raise ValueError(f"expected single quoted string but got {quoted}")
            name, i = _unquote(quoted[1:-1]), i + 3
        else:
            raise ValueError(f"expected [ or . but got: {tok}")
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if isinstance(props, dict) and props:
            sub = props.get(name)
            if not isinstance(sub, dict):
                raise ValueError("does not refer to a valid field")
            out = f"{out}.{name}" if out else name
            node = sub
        elif isinstance(extra, dict):
            out = f"{out}[{name}]"
            node = extra
        else:
            raise ValueError("does not refer to a valid field")
    return out


_UNQUOTE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "'": "'", "\\": "\\"}


def _unquote(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        char = match.group(1)
        if char not in _UNQUOTE:
            raise ValueError(f"invalid string literal: invalid escape char \\{char}")
        return _UNQUOTE[char]

    return re.sub(r"\\(.)", one, text)
