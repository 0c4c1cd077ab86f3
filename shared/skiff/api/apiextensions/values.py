"""A custom object's values against its CRD's `openAPIV3Schema` (SPEC EX3): the checks
kube-apiserver runs through kube-openapi's schema validator (type, nullable, enum, required,
pattern, bounds, lengths, item and property counts, formats, allOf/anyOf/oneOf/not), with its
messages (`spec.replicas in body must be of type integer: "string"`) and the field errors
apiextensions turns them into. One pass over the object; the schema is read, never copied."""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from skiff.api.apiextensions.goregex import GoRegexError, compile_go_pattern
from skiff.api.errors import FieldError, invalid, not_supported, required, too_long
from skiff.api.selectors import dns1123_label_problems
from skiff.api.types import ObjView

__all__ = ["NIL_PATH", "TYPE_INVALID", "go_number", "json_type", "too_many", "type_invalid",
           "validate_values"]

# Composite (allOf/anyOf/oneOf/not) failures carry no field in kube-openapi, so
# apiextensions reports them on a nil path with an empty value.
NIL_PATH = "<nil>"
TYPE_INVALID = "FieldValueTypeInvalid"


def validate_values(schema: ObjView, value: Any, *, path: str = "") -> list[FieldError]:
    """Every schema violation of `value` (the whole object when `path` is empty)."""
    errors: list[FieldError] = []
    _check(schema, value, path, errors)
    return errors


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, as kube-openapi infers it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def go_number(value: Any) -> str:
    """A schema bound as Go's `%v` prints a float64 (`10`, `1.5`, `1e+06`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    number = float(value)
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    text = "".join(map(str, digits))
    exp = len(digits) + int(exponent) - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return prefix + format(Decimal(repr(abs(number))).normalize(), "f")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _name(path: str) -> str:
    return path


def _types(schema: ObjView) -> list[str]:
    if schema.get("x-kubernetes-int-or-string") is True:
        return ["integer", "string"]
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) and kind else []


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    """apimachinery's `field.TypeInvalid`: shown as `Invalid value`, with its own cause."""
    return FieldError(path, "Invalid value", detail, value, reason=TYPE_INVALID)


def _type_error(path: str, expected: str, actual: str) -> FieldError:
    return type_invalid(path, actual,
                        f"{_name(path)} in body must be of type {expected}: {json.dumps(actual)}")


def _check(schema: ObjView, value: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(schema, Mapping):
        return
    types = _types(schema)
    if value is None:
        if types and "null" not in types and schema.get("nullable") is not True:
            errors.append(_type_error(path, ",".join(types), "null"))
        _check_enum(schema, value, path, errors)
        return
    _check_type(schema, types, value, path, errors)
    _check_junctors(schema, value, path, errors)
    if isinstance(value, str):
        _check_string(schema, value, path, errors)
        _check_format(schema, types, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, errors)
    elif isinstance(value, list):
        _check_array(schema, value, path, errors)
    _check_enum(schema, value, path, errors)
    if isinstance(value, Mapping):
        _check_object(schema, value, path, errors)


def _check_type(schema: ObjView, types: list[str], value: Any, path: str,
                errors: list[FieldError]) -> None:
    if not types:
        return
    actual = json_type(value)
    numeric = "number" in types or "integer" in types
    if schema.get("format") and isinstance(value, str | list) and not numeric:
        return  # kube-openapi leaves a formatted string/array to the format check
    float_int = actual == "number" and float(value).is_integer() and "integer" in types
    int_float = actual == "integer" and "number" in types
    if actual not in types and not float_int and not int_float:
        errors.append(_type_error(path, ",".join(types), actual))


def _check_junctors(schema: ObjView, value: Any, path: str, errors: list[FieldError]) -> None:
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of:
        first_failure: list[FieldError] | None = None
        for sub in any_of:
            found = validate_values(sub, value, path=path)
            if not found:
                break
            if first_failure is None:
                first_failure = found
        else:
            errors.append(_composite(f"{json.dumps(path)} must validate at least one schema "
                                     "(anyOf)"))
            errors.extend(first_failure or [])
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        valid = 0
        first_failure = None
        for sub in one_of:
            found = validate_values(sub, value, path=path)
            if not found:
                valid += 1
            elif first_failure is None and valid == 0:
                first_failure = found
        if valid != 1:
            more = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            errors.append(_composite(f"{json.dumps(path)} must validate one and only one "
                                     f"schema (oneOf). {more}"))
            if valid == 0:
                errors.extend(first_failure or [])
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        valid = 0
        for sub in all_of:
            found = validate_values(sub, value, path=path)
            valid += not found
            errors.extend(found)
        if valid != len(all_of):
            more = ". None validated" if valid == 0 else ""
            errors.append(_composite(f"{json.dumps(path)} must validate all the schemas "
                                     f"(allOf){more}"))
    not_schema = schema.get("not")
    if isinstance(not_schema, Mapping) and not validate_values(not_schema, value, path=path):
        errors.append(_composite(f"{json.dumps(path)} must not validate the schema (not)"))


def _composite(detail: str) -> FieldError:
    return invalid(NIL_PATH, "", detail)


def _check_string(schema: ObjView, value: str, path: str, errors: list[FieldError]) -> None:
    max_length, min_length = schema.get("maxLength"), schema.get("minLength")
    if isinstance(max_length, int) and len(value) > max_length:
        errors.append(too_long(path, value, max_length))
    if isinstance(min_length, int) and len(value) < min_length:
        errors.append(invalid(path, value,
                              f"{_name(path)} in body should be at least {min_length} chars "
                              "long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            matched = compile_go_pattern(pattern).search(value) is not None
        except GoRegexError:
            matched = True  # a CRD with a bad pattern is refused when it is written
        if not matched:
            errors.append(invalid(path, value, f"{_name(path)} in body should match '{pattern}'"))


def _check_number(schema: ObjView, value: float, path: str, errors: list[FieldError]) -> None:
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        quotient = Decimal(repr(value)) / Decimal(repr(multiple))
        if quotient != quotient.to_integral_value():
            errors.append(invalid(path, value, f"{_name(path)} in body should be a multiple "
                                               f"of {go_number(multiple)}"))
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float) and not isinstance(maximum, bool):
        if schema.get("exclusiveMaximum") is True and value >= maximum:
            errors.append(invalid(path, value, f"{_name(path)} in body should be less than "
                                               f"{go_number(maximum)}"))
        elif value > maximum:
            errors.append(invalid(path, value, f"{_name(path)} in body should be less than or "
                                               f"equal to {go_number(maximum)}"))
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float) and not isinstance(minimum, bool):
        if schema.get("exclusiveMinimum") is True and value <= minimum:
            errors.append(invalid(path, value, f"{_name(path)} in body should be greater than "
                                               f"{go_number(minimum)}"))
        elif value < minimum:
            errors.append(invalid(path, value, f"{_name(path)} in body should be greater than "
                                               f"or equal to {go_number(minimum)}"))


def too_many(path: str, actual: int, limit: int) -> FieldError:
    """apimachinery's `field.TooMany`: `Too many: 3: must have at most 2 items`."""
    unit = "item" if limit == 1 else "items"
    return FieldError(path, "Too many", f"must have at most {limit} {unit}", actual)


def _check_array(schema: ObjView, value: list[Any], path: str,
                 errors: list[FieldError]) -> None:
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    if isinstance(min_items, int) and len(value) < min_items:
        errors.append(invalid(path, len(value),
                              f"{_name(path)} in body should have at least {min_items} items"))
    if isinstance(max_items, int) and len(value) > max_items:
        errors.append(too_many(path, len(value), max_items))
    if schema.get("uniqueItems") is True:
        seen = {json.dumps(item, sort_keys=True) for item in value}
        if len(seen) != len(value):
            errors.append(invalid(path, value, f"{_name(path)} in body shouldn't contain "
                                               "duplicates"))
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _check(items, item, f"{path}[{i}]", errors)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _check_enum(schema: ObjView, value: Any, path: str, errors: list[FieldError]) -> None:
    enum = schema.get("enum")
    if not isinstance(enum, list) or not enum:
        return
    if any(_equal(value, allowed) for allowed in enum):
        return
    shown = [a if isinstance(a, str) else json.dumps(a) for a in enum]
    errors.append(not_supported(path, "null" if value is None else value, shown))


def _check_object(schema: ObjView, value: Mapping[str, Any], path: str,
                  errors: list[FieldError]) -> None:
    count = len(value)
    min_props, max_props = schema.get("minProperties"), schema.get("maxProperties")
    if isinstance(min_props, int) and count < min_props:
        errors.append(invalid(path, count, f"{_name(path)} in body should have at least "
                                           f"{min_props} properties"))
    if isinstance(max_props, int) and count > max_props:
        errors.append(too_many(path, count, max_props))
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    additional = schema.get("additionalProperties")
    if additional is False:
        for key in value:
            if key not in properties:
                errors.append(invalid(path, "", f"{_name(path)}.{key} in body is a forbidden "
                                                "property"))
    elif isinstance(additional, Mapping):
        for key, item in value.items():
            if key not in properties:
                _check(additional, item, _child(path, key), errors)
    for key, sub in properties.items():
        if key in value:
            _check(sub, value[key], _child(path, key), errors)
    needed = schema.get("required")
    if isinstance(needed, list):
        for key in needed:
            if isinstance(key, str) and key not in value:
                errors.append(required(_child(path, key)))


# --- formats (kube's supported list; others are ignored as kube strips them) ----------

_UUID = r"[0-9a-f]{8}-?[0-9a-f]{4}-?%s[0-9a-f]{3}-?%s[0-9a-f]{3}-?[0-9a-f]{12}"
_FORMAT_PATTERNS: dict[str, re.Pattern[str]] = {
    "uuid": re.compile(f"(?i)^{_UUID % ('[0-9a-f]', '[0-9a-f]')}$"),
    "uuid3": re.compile(f"(?i)^{_UUID % ('3', '[0-9a-f]')}$"),
    "uuid4": re.compile(f"(?i)^{_UUID % ('4', '[89ab]')}$"),
    "uuid5": re.compile(f"(?i)^{_UUID % ('5', '[89ab]')}$"),
    "bsonobjectid": re.compile(r"^[0-9a-fA-F]{24}$"),
    "mac": re.compile(r"^([0-9A-Fa-f]{2}[:-]){5,19}[0-9A-Fa-f]{2}$|"
                      r"^([0-9A-Fa-f]{4}\.){2,9}[0-9A-Fa-f]{4}$"),
    "hexcolor": re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"),
    "rgbcolor": re.compile(r"^rgb\(\s*(\d{1,3}%?)\s*,\s*(\d{1,3}%?)\s*,\s*(\d{1,3}%?)\s*\)$"),
    "ssn": re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"),
    "email": re.compile(r"^[^@\s<>]+@[^@\s<>]+$"),
    "hostname": re.compile(r"^([a-zA-Z0-9]((-?[a-zA-Z0-9]{0,62})?)|([a-zA-Z0-9](([a-zA-Z0-9-]"
                           r"{0,61}[a-zA-Z0-9])?)(\.)){1,}([a-zA-Z]){2,63})$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "datetime": re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?"
                           r"([Zz]|[+-]\d{2}:?\d{2})?$"),
    "duration": re.compile(r"^(([+-]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|0)$|"
                           r"^\d+\s*(ns|us|ms|s|m|h|d|w|nanoseconds?|microseconds?|"
                           r"milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$"),
}


def _valid_date(value: str) -> bool:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _valid_datetime(value: str) -> bool:
    if _FORMAT_PATTERNS["datetime"].match(value) is None:
        return False
    return _valid_date(value[:10]) and int(value[11:13]) < 24 and int(value[14:16]) < 60 \
        and int(value[17:19]) < 61


def _valid_byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _valid_ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False
    return check


def _valid_cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _valid_uri(value: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$", value) is not None or (
        value.startswith("/") and " " not in value)


def _valid_long_name(value: str) -> bool:
    return re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                        value) is not None and len(value) <= 253


_FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "date": _valid_date,
    "datetime": _valid_datetime,
    "byte": _valid_byte,
    "ipv4": _valid_ip(4),
    "ipv6": _valid_ip(6),
    "cidr": _valid_cidr,
    "uri": _valid_uri,
    "password": lambda value: True,
    "k8s-short-name": lambda value: not dns1123_label_problems(value),
    "k8s-long-name": _valid_long_name,
}


def _check_format(schema: ObjView, types: list[str], value: str, path: str,
                  errors: list[FieldError]) -> None:
    fmt = schema.get("format")
    if not isinstance(fmt, str) or not fmt or (types and types != ["string"]):
        return
    name = fmt if fmt.startswith("k8s-") else fmt.replace("-", "")
    check = _FORMAT_CHECKS.get(name)
    if check is not None:
        ok = check(value)
    elif name in _FORMAT_PATTERNS:
        ok = _FORMAT_PATTERNS[name].match(value) is not None
    else:
        return  # formats kube does not support are ignored
    if not ok:
        errors.append(type_invalid(path, value, f"{_name(path)} in body must be of type "
                                                f"{fmt}: {json.dumps(value)}"))
