"""Kubernetes' CEL function libraries (`k8s.io/apiserver/pkg/cel/library`) on top of CEL's
standard, strings, math and encoders extensions: lists (`isSorted`, `sum`, `min`, `max`,
`indexOf`, `lastIndexOf`), sets (`sets.contains`, `sets.equivalent`, `sets.intersects`),
regex (`find`, `findAll`), URLs (`isURL`, `url(...).getHost()`...), quantities
(`isQuantity`, `quantity(...).isGreaterThan(...)`...), formats (`skiff.api.cel.formats`)
and IPs and CIDRs (`skiff.api.cel.network`).

A URL or a quantity is an opaque type in Kubernetes; the Python runtime cannot declare
opaque types, so each is a map with one marker key (`__url__`, `__quantity__`) holding its
text, and its member functions are declared on maps. A function given something it cannot
use raises ValueError, which the runtime turns into the expression's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cel_expr_python import cel  # type: ignore[import-untyped]

from skiff.api.cel import formats, network
from skiff.api.quantity import canonical, parse_quantity

_DYN = cel.Type.DYN
_LIST = cel.Type.List(cel.Type.DYN)
_MAP = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
_STR = cel.Type.STRING
_INT = cel.Type.INT
_BOOL = cel.Type.BOOL
_DOUBLE = cel.Type.DOUBLE
_STRLIST = cel.Type.List(cel.Type.STRING)

_URL = "__url__"
_QUANTITY = "__quantity__"


# lists ---------------------------------------------------------------------------------
def _is_sorted(items: list[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    total: Any = 0
    for item in items:
        total = total + item
    return total


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min(list) called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max(list) called on empty list")
    return max(items)


def _index_of(items: list[Any], value: Any) -> int:
    return next((i for i, item in enumerate(items) if item == value), -1)


def _last_index_of(items: list[Any], value: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if items[i] == value), -1)


# sets (cel's ext.Sets, in Kubernetes' environment) --------------------------------------
def _set_contains(items: list[Any], wanted: list[Any]) -> bool:
    return all(any(w == item for item in items) for w in wanted)


def _set_equivalent(a: list[Any], b: list[Any]) -> bool:
    return _set_contains(a, b) and _set_contains(b, a)


def _set_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(x == y for x in a for y in b)


# regex ---------------------------------------------------------------------------------
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"invalid regular expression: {err}") from None


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str) -> list[str]:
    return [m.group(0) for m in _regex(pattern).finditer(text)]


def _find_all_n(text: str, pattern: str, limit: int) -> list[str]:
    found = _find_all(text, pattern)
    return found if limit < 0 else found[:limit]


# URLs ----------------------------------------------------------------------------------
def _parse_url(text: str) -> Any:
    parts = urlsplit(text)
    if not parts.scheme and not text.startswith("/"):
        raise ValueError(f"URL is invalid: parse {text!r}: invalid URI for request")
    return parts


def _is_url(text: str) -> bool:
    try:
        _parse_url(text)
    except ValueError:
        return False
    return True


def _url(text: str) -> dict[str, Any]:
    _parse_url(text)
    return {_URL: text}


def _url_of(value: dict[str, Any]) -> Any:
    if _URL not in value:
        raise ValueError("no such overload")
    return _parse_url(value[_URL])


def _hostname(value: dict[str, Any]) -> str:
    return str(_url_of(value).hostname or "")


def _port(value: dict[str, Any]) -> str:
    netloc = str(_url_of(value).netloc).rsplit("@", 1)[-1]
    if netloc.endswith("]") or ":" not in netloc:
        return ""
    return netloc.rsplit(":", 1)[1]


def _query(value: dict[str, Any]) -> dict[str, list[str]]:
    return {k: list(v) for k, v in parse_qs(_url_of(value).query,
                                            keep_blank_values=True).items()}


# quantities ----------------------------------------------------------------------------
def _quantity(text: str) -> dict[str, Any]:
    parse_quantity(text)
    return {_QUANTITY: text}


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def _q(value: Any) -> Fraction:
    if isinstance(value, dict) and _QUANTITY in value:
        return parse_quantity(value[_QUANTITY])
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise ValueError("no such overload")


def _q_result(value: Fraction, like: Any) -> dict[str, Any]:
    binary = isinstance(like, dict) and str(like.get(_QUANTITY, "")).strip().endswith("i")
    return {_QUANTITY: canonical(value, binary=binary)}


def _as_integer(value: Any) -> int:
    number = _q(value)
    if number.denominator != 1 or not -(2**63) <= number.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return number.numerator


def _sign(value: Any) -> int:
    number = _q(value)
    return (number > 0) - (number < 0)


def _compare(a: Any, b: Any) -> int:
    x, y = _q(a), _q(b)
    return (x > y) - (x < y)


def _overload(oid: str, result: Any, params: list[Any], impl: Callable[..., Any], *,
              member: bool) -> Any:
    return cel.Overload(oid, result, params, is_member=member, impl=impl)


def _decl(name: str, *overloads: Any) -> Any:
    return cel.FunctionDecl(name, list(overloads))


def extension() -> Any:
    """Kubernetes' libraries as one CEL extension."""
    m = True
    return cel.CelExtension("kubernetes", [
        _decl("isSorted", _overload("k8s_list_is_sorted", _BOOL, [_LIST], _is_sorted, member=m)),
        _decl("sum", _overload("k8s_list_sum", _DYN, [_LIST], _sum, member=m)),
        _decl("min", _overload("k8s_list_min", _DYN, [_LIST], _min, member=m)),
        _decl("max", _overload("k8s_list_max", _DYN, [_LIST], _max, member=m)),
        _decl("indexOf", _overload("k8s_list_index_of", _INT, [_LIST, _DYN], _index_of,
                                   member=m)),
        _decl("lastIndexOf", _overload("k8s_list_last_index_of", _INT, [_LIST, _DYN],
                                       _last_index_of, member=m)),
        _decl("sets.contains", _overload("k8s_sets_contains", _BOOL, [_LIST, _LIST],
                                         _set_contains, member=False)),
        _decl("sets.equivalent", _overload("k8s_sets_equivalent", _BOOL, [_LIST, _LIST],
                                           _set_equivalent, member=False)),
        _decl("sets.intersects", _overload("k8s_sets_intersects", _BOOL, [_LIST, _LIST],
                                           _set_intersects, member=False)),
        _decl("find", _overload("k8s_string_find", _STR, [_STR, _STR], _find, member=m)),
        _decl("findAll",
              _overload("k8s_string_find_all", _STRLIST, [_STR, _STR], _find_all, member=m),
              _overload("k8s_string_find_all_n", _STRLIST, [_STR, _STR, _INT], _find_all_n,
                        member=m)),
        _decl("isURL", _overload("k8s_is_url", _BOOL, [_STR], _is_url, member=False)),
        _decl("url", _overload("k8s_url", _MAP, [_STR], _url, member=False)),
        _decl("getScheme", _overload("k8s_url_scheme", _STR, [_MAP],
                                     lambda u: _url_of(u).scheme, member=m)),
        _decl("getHost", _overload("k8s_url_host", _STR, [_MAP],
                                   lambda u: _url_of(u).netloc.rsplit("@", 1)[-1], member=m)),
        _decl("getHostname", _overload("k8s_url_hostname", _STR, [_MAP], _hostname, member=m)),
        _decl("getPort", _overload("k8s_url_port", _STR, [_MAP], _port, member=m)),
        _decl("getEscapedPath", _overload("k8s_url_path", _STR, [_MAP],
                                          lambda u: _url_of(u).path, member=m)),
        _decl("getQuery", _overload("k8s_url_query", cel.Type.Map(_STR, _STRLIST), [_MAP],
                                    _query, member=m)),
        _decl("isQuantity", _overload("k8s_is_quantity", _BOOL, [_STR], _is_quantity,
                                      member=False)),
        _decl("quantity", _overload("k8s_quantity", _MAP, [_STR], _quantity, member=False)),
        _decl("isInteger", _overload("k8s_quantity_is_integer", _BOOL, [_MAP],
                                     lambda q: _q(q).denominator == 1, member=m)),
        _decl("asInteger", _overload("k8s_quantity_as_integer", _INT, [_MAP], _as_integer,
                                     member=m)),
        _decl("asApproximateFloat", _overload("k8s_quantity_as_float", _DOUBLE, [_MAP],
                                              lambda q: float(_q(q)), member=m)),
        _decl("sign", _overload("k8s_quantity_sign", _INT, [_MAP], _sign, member=m)),
        _decl("isGreaterThan", _overload("k8s_quantity_gt", _BOOL, [_MAP, _MAP],
                                         lambda a, b: _compare(a, b) > 0, member=m)),
        _decl("isLessThan", _overload("k8s_quantity_lt", _BOOL, [_MAP, _MAP],
                                      lambda a, b: _compare(a, b) < 0, member=m)),
        _decl("compareTo", _overload("k8s_quantity_compare", _INT, [_MAP, _MAP], _compare,
                                     member=m)),
        _decl("add",
              _overload("k8s_quantity_add", _MAP, [_MAP, _MAP],
                        lambda a, b: _q_result(_q(a) + _q(b), a), member=m),
              _overload("k8s_quantity_add_int", _MAP, [_MAP, _INT],
                        lambda a, b: _q_result(_q(a) + _q(b), a), member=m)),
        _decl("sub",
              _overload("k8s_quantity_sub", _MAP, [_MAP, _MAP],
                        lambda a, b: _q_result(_q(a) - _q(b), a), member=m),
              _overload("k8s_quantity_sub_int", _MAP, [_MAP, _INT],
                        lambda a, b: _q_result(_q(a) - _q(b), a), member=m)),
        *formats.declarations(),
        *network.declarations(),
    ])

