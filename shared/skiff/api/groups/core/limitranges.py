"""LimitRange (v1): its defaults, validation and `kubectl get` columns.

A LimitRange gives a namespace's containers default requests and limits and bounds them
(`min`, `max`, `maxLimitRequestRatio`) per Container, per Pod (sums) or per
PersistentVolumeClaim (storage); the apiserver's LimitRanger admission applies it
(`skiff.apiserver.limitranger`). Defaults follow SetDefaults_LimitRangeItem: for a Container
item a missing default limit is the max, a missing default request the default limit, and
else the min. Validation follows ValidateLimitRange: a supported type, no defaults on a Pod
item, quantities that are valid, and min <= defaultRequest <= default <= max, with a ratio
of at least 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from skiff.api.columns import meta
from skiff.api.errors import FieldError, forbidden, invalid, not_supported, required
from skiff.api.fieldschema import OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.quantity import parse_quantity
from skiff.api.types import Obj

LIMIT_TYPES = ["Container", "PersistentVolumeClaim", "Pod"]
_AMOUNTS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def _default_limit_range(obj: Obj) -> None:
    for item in (obj.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        request = item.setdefault("defaultRequest", {})
        if not isinstance(default, dict) or not isinstance(request, dict):
            continue
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            request.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            request.setdefault(key, value)
        for name in ("default", "defaultRequest"):
            if not item[name]:
                del item[name]


def _validate_limit_range(obj: Mapping[str, Any],
                          old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    limits = spec.get("limits")
    if not isinstance(limits, list):
        return [required("spec.limits")] if limits is None else [
            invalid("spec.limits", limits, "must be a list")]
    errors: list[FieldError] = []
    for i, item in enumerate(limits):
        path = f"spec.limits[{i}]"
        if not isinstance(item, dict):
            errors.append(invalid(path, item, "must be an object"))
            continue
        kind = item.get("type")
        if not kind:
            errors.append(required(f"{path}.type"))
        elif kind not in LIMIT_TYPES:
            errors.append(not_supported(f"{path}.type", kind, LIMIT_TYPES))
        parsed: dict[str, dict[str, Fraction]] = {}
        for name in _AMOUNTS:
            parsed[name] = {}
            amounts = item.get(name)
            if amounts is None:
                continue
            if not isinstance(amounts, dict):
                errors.append(invalid(f"{path}.{name}", amounts, "must be a map"))
                continue
            for key, value in amounts.items():
                try:
                    quantity = parse_quantity(value)
                except ValueError as exc:
                    errors.append(invalid(f"{path}.{name}[{key}]", value, str(exc)))
                    continue
                if quantity < 0:
                    errors.append(invalid(f"{path}.{name}[{key}]", value,
                                          "must be greater than or equal to 0"))
                parsed[name][key] = quantity
        if kind == "Pod":
            errors += [forbidden(f"{path}.{name}", "may not be specified when `type` is "
                                                   "'Pod'")
                       for name in ("default", "defaultRequest") if item.get(name)]
        if kind == "PersistentVolumeClaim" and "storage" not in parsed["min"] and \
                "storage" not in parsed["max"]:
            errors.append(required(f"{path}.limits", "either minimum or maximum storage "
                                   "value is required, but neither was provided"))
        errors += _ordering(item, parsed, path)
    return errors


def _ordering(item: Mapping[str, Any], parsed: dict[str, dict[str, Fraction]],
              path: str) -> list[FieldError]:
    """min <= defaultRequest <= default <= max per resource; ratios >= 1 and <= max/min."""
    errors: list[FieldError] = []
    text = {name: item.get(name) or {} for name in _AMOUNTS}
    checks = (("min", "max", "min value {a} is greater than max value {b}"),
              ("defaultRequest", "max", "default request value {a} is greater than max "
                                        "value {b}"),
              ("default", "max", "default value {a} is greater than max value {b}"),
              ("min", "defaultRequest", "min value {a} is greater than default request "
                                        "value {b}"),
              ("min", "default", "min value {a} is greater than default value {b}"),
              ("defaultRequest", "default", "default request value {a} is greater than "
                                            "default limit value {b}"))
    for low, high, message in checks:
        for key, value in parsed[low].items():
            bound = parsed[high].get(key)
            if bound is not None and value > bound:
                errors.append(invalid(f"{path}.{low}[{key}]", text[low][key],
                                      message.format(a=text[low][key], b=text[high][key])))
    for key, ratio in parsed["maxLimitRequestRatio"].items():
        shown = text["maxLimitRequestRatio"][key]
        if ratio < 1:
            errors.append(invalid(f"{path}.maxLimitRequestRatio[{key}]", shown,
                                  f"ratio {shown} is less than 1"))
        least, most = parsed["min"].get(key), parsed["max"].get(key)
        if least and most is not None and ratio > most / least:
            errors.append(invalid(f"{path}.maxLimitRequestRatio[{key}]", shown,
                                  f"ratio {shown} is greater than max/min = "
                                  f"{float(most / least):f}"))
    return errors


RULES = GroupRules(
    defaulters={"LimitRange": _default_limit_range},
    validators={"LimitRange": _validate_limit_range},
    # kubectl's LimitRange printer: its name and creation time
    columns={"LimitRange": [("NAME", meta("name")), ("CREATED AT", meta("creationTimestamp"))]},
    schemas={"LimitRange": fields(*TOP, metadata=OBJECT_META, spec=fields(limits=ListOf(fields(
        "type", "max", "min", "default", "defaultRequest", "maxLimitRequestRatio"))))},
)
