"""Kubernetes' CEL `format` library (`k8s.io/apiserver/pkg/cel/library/format.go`, 1.32+):
`!format.dns1123Label().validate(self).hasValue()` and its siblings, with the messages of
Kubernetes' name validators (`skiff.api.selectors`, `skiff.api.fieldchecks`).

In Kubernetes a Format is an opaque type and `validate` returns an optional list of
problems. The Python runtime can declare neither, so a Format is a map with the marker key
`__format__`, `validate` returns the list of problems (empty when valid), and
`hasValue()` and `value()` are declared on lists of strings and on a `format.named(...)`
map, so that rules written for Kubernetes read the same (`orValue` on a validation result
is not supported).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cel_expr_python import cel  # type: ignore[import-untyped]

from skiff.api.fieldchecks import iana_svc_name_problems
from skiff.api.names import dns1035_label_problems
from skiff.api.selectors import (
    dns1123_label_problems,
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
)

_FORMAT = "__format__"


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A name prefix (for generateName) may end in '-': Kubernetes masks it."""
    return lambda value: check(value[:-1] + "a" if value.endswith("-") else value)


def _uri(value: str) -> list[str]:
    parts = urlsplit(value)
    if not value or (not parts.scheme and not value.startswith("/")):
        return [f'parse "{value}": invalid URI for request']
    return []


def _uuid(value: str) -> list[str]:
    try:
        uuid.UUID(value)
    except ValueError:
        return ["does not match the UUID format"]
    return [] if re.fullmatch(r"[0-9a-fA-F-]{36}", value) else ["does not match the UUID format"]


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return ["invalid date"]
    return [] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) else ["invalid date"]


def _datetime(value: str) -> list[str]:
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return ["invalid datetime"]
    return []


FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label_problems,
    "dns1123Subdomain": dns1123_subdomain_problems,
    "dns1035Label": dns1035_label_problems,
    "qualifiedName": qualified_name_problems,
    "portName": iana_svc_name_problems,
    "dns1123LabelPrefix": _prefix(dns1123_label_problems),
    "dns1123SubdomainPrefix": _prefix(dns1123_subdomain_problems),
    "dns1035LabelPrefix": _prefix(dns1035_label_problems),
    "labelValue": label_value_problems,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def _validate(fmt: dict[str, Any], value: str) -> list[str]:
    check = FORMATS.get(str(fmt.get(_FORMAT, "")))
    if check is None:
        raise ValueError("no such overload")
    return check(value)


def _named(name: str) -> dict[str, Any]:
    return {_FORMAT: name} if name in FORMATS else {}


def _value(found: Any) -> Any:
    if not found:
        raise ValueError("optional.none() dereference")
    return found


def declarations() -> list[Any]:
    """The format library's functions, for `skiff.api.cel.library.extension`."""
    fmt = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    strings = cel.Type.List(cel.Type.STRING)
    decls = [
        cel.FunctionDecl("validate", [cel.Overload(
            "k8s_format_validate", strings, [fmt, cel.Type.STRING], is_member=True,
            impl=_validate)]),
        cel.FunctionDecl("format.named", [cel.Overload(
            "k8s_format_named", fmt, [cel.Type.STRING], is_member=False, impl=_named)]),
        cel.FunctionDecl("hasValue", [
            cel.Overload("k8s_problems_has_value", cel.Type.BOOL, [strings], is_member=True,
                         impl=lambda found: bool(found)),
            cel.Overload("k8s_named_has_value", cel.Type.BOOL, [fmt], is_member=True,
                         impl=lambda found: _FORMAT in found)]),
        cel.FunctionDecl("value", [
            cel.Overload("k8s_problems_value", strings, [strings], is_member=True,
                         impl=_value),
            cel.Overload("k8s_named_value", fmt, [fmt], is_member=True, impl=_value)]),
    ]
    for name in FORMATS:
        decls.append(cel.FunctionDecl(f"format.{name}", [cel.Overload(
            f"k8s_format_{name}", fmt, [], is_member=False,
            impl=lambda name=name: {_FORMAT: name})]))
    return decls
