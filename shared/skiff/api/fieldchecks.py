"""Field-check primitives every API group's validation is built from.

Kubernetes' `pkg/apis/*/validation` share `apimachinery/pkg/util/validation/field` and a
handful of small checks (an optional int64, an enum value, a port, an immutable field, an
int-or-percent); these are Skiff's, each returning `FieldError`s with the field's path so a
user sees the message Kubernetes would print. Group modules (`skiff.api.groups`) import them;
they import nothing of the groups.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.types import ObjView

NameCheck = Callable[[str], list[str]]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
IMMUTABLE = "field is immutable"


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The longest grace period Kubernetes can turn into a deadline: seconds that still fit a Go
# time.Duration (int64 nanoseconds), about 292 years. Longer ones cannot be served.
MAX_GRACE_SECONDS = INT64_MAX // 10**9


def int_field(obj: ObjView, key: str, path: str, *, minimum: int | None = None,
              maximum: int = INT64_MAX, detail: str | None = None) -> list[FieldError]:
    """An optional integer field: an int (not bool, not str) in [`minimum`, `maximum`]; every
    integer field of the API is an int64 at most."""
    if key not in obj or obj[key] is None:
        return []
    value = obj[key]
    if not is_int(value):
        return [invalid(path, value, "must be an integer")]
    if minimum is not None and value < minimum:
        return [invalid(path, value, detail or f"must be greater than or equal to {minimum}")]
    if value < INT64_MIN:
        return [invalid(path, value, "must fit in a 64-bit signed integer")]
    if value > maximum:
        return [invalid(path, value, "must fit in a 64-bit signed integer"
                        if maximum == INT64_MAX else f"must be less than or equal to {maximum}")]
    return []


def grace_period_problem(value: int) -> str | None:
    """Why a requested deletion grace period cannot be served, or None."""
    if value > MAX_GRACE_SECONDS:
        return f"must be less than or equal to {MAX_GRACE_SECONDS}"
    if value < INT64_MIN:
        return "must fit in a 64-bit signed integer"
    return None


def revision_problem(value: int) -> str | None:
    """Why a resourceVersion/revision number cannot name an etcd revision, or None."""
    if value < 0 or value > INT64_MAX:
        return f"must be between 0 and {INT64_MAX}"
    return None


def str_field(obj: ObjView, key: str, path: str) -> list[FieldError]:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return []


def enum_field(obj: ObjView, key: str, path: str, allowed: list[str], *,
               is_required: bool = False) -> list[FieldError]:
    value = obj.get(key)
    if value is None or value == "":
        return [required(path)] if is_required else []
    if value not in allowed:
        return [not_supported(path, value, allowed)]
    return []


def as_dict(value: Any, path: str) -> tuple[ObjView, list[FieldError]]:
    """`value` as a mapping ({} when missing) and an error when it is something else."""
    if value is None:
        return {}, []
    if isinstance(value, Mapping):
        return value, []
    return {}, [invalid(path, value, "must be an object")]


def as_list(value: Any, path: str) -> tuple[list[Any], list[FieldError]]:
    if value is None:
        return [], []
    if isinstance(value, list):
        return value, []
    return [], [invalid(path, value, "must be a list")]


def string_list(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [invalid(path, value, "must be a list of strings")]
    return []


def name_field(value: Any, path: str, check: NameCheck) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return [invalid(path, value, p) for p in check(value)]


def immutable(new: Any, old: Any, path: str) -> list[FieldError]:
    return [] if new == old else [invalid(path, new, IMMUTABLE)]


def port_field(value: Any, path: str, *, allow_name: bool) -> list[FieldError]:
    if value is None or value == "":
        return [required(path)]
    if is_int(value):
        if not 1 <= value <= 65535:
            return [invalid(path, value, "must be between 1 and 65535, inclusive")]
        return []
    if allow_name and isinstance(value, str):
        return [invalid(path, value, p) for p in iana_svc_name_problems(value)]
    return [invalid(path, value, "must be an integer between 1 and 65535")]


_IANA_SVC_NAME = re.compile(r"^[-a-z0-9]+$")


def iana_svc_name_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not _IANA_SVC_NAME.match(value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def int_or_percent(value: Any, path: str) -> list[FieldError]:
    """`minAvailable`, `maxUnavailable`: an int ≥ 0 or "N%" with 0 ≤ N ≤ 100."""
    if is_int(value):
        if value < 0:
            return [invalid(path, value, "must be greater than or equal to 0")]
        return []
    if isinstance(value, str):
        match = re.fullmatch(r"([0-9]+)%", value)
        if match is None:
            return [invalid(path, value, "a valid percent string must be a numeric string "
                                         "followed by an ending '%' (e.g. '1%',  or '93%')")]
        if int(match.group(1)) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    return [invalid(path, value, "must be an integer or a percentage string like '50%'")]



def is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True
