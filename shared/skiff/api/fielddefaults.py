"""Defaulting primitives: reach a nested object and set a field that was left unset.

Kubernetes' defaulters (`pkg/apis/*/v1/defaults.go`) give a field its default when it is
missing or holds its zero value (`set_default`); the newer kinds' defaulters only fill a
missing one (`set_if_none`). `child` never replaces what the client sent; `ensure_child`
replaces a non-object with `{}`.
"""

from __future__ import annotations

from typing import Any

from skiff.api.types import Obj


def child(obj: Obj, key: str) -> Obj:
    """`obj[key]` as a dict, created when missing (and left alone when it is not a dict)."""
    value = obj.get(key)
    if value is None:
        value = obj[key] = {}
    return value if isinstance(value, dict) else {}


def set_default(obj: Obj, key: str, value: Any) -> None:
    """`obj[key] = value` unless it holds something other than None, "" or 0."""
    if obj.get(key) in (None, "", 0):
        obj[key] = value


def ensure_child(obj: Obj, key: str) -> Obj:
    """`obj[key]` as a dict, made `{}` when it is missing or not a dict."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def set_if_none(obj: Obj, key: str, value: Any) -> None:
    """`obj[key] = value` unless it is set (to anything but None)."""
    if obj.get(key) is None:
        obj[key] = value


def template_spec(obj: Obj) -> Obj:
    """A workload's `spec.template.spec`, created on the way."""
    return ensure_child(ensure_child(ensure_child(obj, "spec"), "template"), "spec")
