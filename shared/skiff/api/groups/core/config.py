"""ConfigMaps, Secrets and ServiceAccounts (core/v1): data keys, `stringData` folded into
`data`, `immutable`, and kubectl's columns."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, forbidden, invalid
from skiff.api.fieldchecks import immutable
from skiff.api.fielddefaults import ensure_child, set_if_none
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView


def _default_secret(obj: Obj) -> None:
    set_if_none(obj, "type", "Opaque")
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = ensure_child(obj, "data")
        for key, value in string_data.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()


_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def _data_keys(data: Any, path: str) -> list[FieldError]:
    if data is None:
        return []
    if not isinstance(data, dict):
        return [invalid(path, data, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    for key, value in data.items():
        if not isinstance(key, str) or not _KEY_RE.match(key) or len(key) > 253 or key in (
                ".", ".."):
            errors.append(invalid(path, key, "a valid config key must consist of alphanumeric "
                                             "characters, '-', '_' or '.'"))
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "must be a string"))
    return errors


def _validate_config_map(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors = _data_keys(obj.get("data"), "data")
    errors += _data_keys(obj.get("binaryData"), "binaryData")
    if old is not None and old.get("immutable") and (
            obj.get("data") != old.get("data") or obj.get("binaryData") != old.get(
                "binaryData")):
        errors.append(forbidden("data", "field is immutable when `immutable` is set"))
    return errors


def _validate_secret(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors = _data_keys(obj.get("data"), "data")  # base64: skiff.api.bytesfields
    if old is not None and old.get("type") != obj.get("type"):
        errors += immutable(obj.get("type"), old.get("type"), "type")
    if old is not None and old.get("immutable") and obj.get("data") != old.get("data"):
        errors.append(forbidden("data", "field is immutable when `immutable` is set"))
    return errors


def _validate_service_account(
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("secrets", "imagePullSecrets"):
        value = obj.get(key)
        if value is not None and not isinstance(value, list):
            errors.append(invalid(key, value, "must be a list"))
    return errors


RULES = GroupRules(
    defaulters={"Secret": _default_secret},
    validators={"ConfigMap": _validate_config_map, "Secret": _validate_secret,
                "ServiceAccount": _validate_service_account},
    columns={
        "ConfigMap": [
            ("NAME", meta("name")),
            ("DATA", lambda o: str(len(o.get("data") or {}) + len(o.get("binaryData") or {}))),
            ("AGE", age_column)],
        "Secret": [
            ("NAME", meta("name")), ("TYPE", lambda o: str(o.get("type", "Opaque"))),
            ("DATA", lambda o: str(len(o.get("data") or {}))), ("AGE", age_column)],
        "ServiceAccount": [
            ("NAME", meta("name")),
            ("SECRETS", lambda o: str(len(o.get("secrets") or []))),
            ("AGE", age_column)],
    },
    schemas={
        "ConfigMap": fields(*TOP, "data", "binaryData", "immutable",
                            metadata=OBJECT_META),
        "Secret": fields(*TOP, "data", "stringData", "type", "immutable",
                         metadata=OBJECT_META),
    },
)
