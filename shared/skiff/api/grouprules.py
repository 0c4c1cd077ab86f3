"""What one API group tells the dispatchers about its kinds: one `GroupRules` value.

Every module of `skiff.api.groups` exports `RULES`: its kinds' defaulters, validators,
kubectl columns (and `-o wide` ones), known-field schemas, the schemas of other served
versions and the status a kind is created with. `skiff.api.catalog` merges them; no group
writes into another's tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.columns import Column
from skiff.api.errors import FieldError
from skiff.api.fieldschema import Fields
from skiff.api.types import Obj, ObjView

Defaulter = Callable[[Obj], None]
Validator = Callable[[ObjView, ObjView | None], list[FieldError]]


@dataclass(frozen=True, kw_only=True)
class GroupRules:
    """One group's per-kind tables (each keyed by kind, `version_schemas` by
    (apiVersion, kind))."""

    defaulters: Mapping[str, Defaulter] = field(default_factory=dict)
    validators: Mapping[str, Validator] = field(default_factory=dict)
    columns: Mapping[str, list[Column]] = field(default_factory=dict)
    wide: Mapping[str, list[Column]] = field(default_factory=dict)
    schemas: Mapping[str, Fields] = field(default_factory=dict)
    version_schemas: Mapping[tuple[str, str], Fields] = field(default_factory=dict)
    initial_status: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
