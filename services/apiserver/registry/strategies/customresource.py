"""The strategy of a custom resource (SPEC EX2–EX4), as apiextensions-apiserver's
`pkg/registry/customresource/strategy.go` has it: one per served CustomResourceDefinition,
made by the CRD controller from the CRD's stored version.

Objects are defaulted, pruned and validated against that version's structural schema and
its CEL rules (`skiff.api.apiextensions`); the status subresource, when the CRD turns it
on, keeps spec and status apart and makes a spec change bump `metadata.generation` (without
it, any change but metadata does); the scale subresource reads and writes the CRD's
replica paths; Table output prints the CRD's `additionalPrinterColumns`.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from skiff.api import ApiError, Reason, jsonpath
from skiff.api.apiextensions import crdversions as crds
from skiff.api.apiextensions.structural import (
    default_custom_object,
    drop_nulls_without_defaults,
    prune_custom_object,
    validate_custom_object,
)
from skiff.api.columns import Column, age, age_column, meta
from skiff.api.errors import FieldError, not_supported
from skiff.api.fieldlabels import NAME, NAMESPACE, KindFieldLabels, at
from skiff.api.kinds import KindInfo
from skiff.api.objectmeta import validate_metadata, validate_metadata_update
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.api.types import Obj, ObjView
from skiff.apiserver.registry.strategy import Strategy

_METADATA_KEEP = ("apiVersion", "kind", "metadata")


class Converter(Protocol):
    """A CRD's conversion between its versions (the apiserver's apiextensions.conversion)."""

    @property
    def several_versions(self) -> bool:
        """Whether the CRD has more than one version (else nothing is ever converted)."""

    async def convert(self, objs: list[Obj], api_version: str) -> list[Obj]:
        """`objs` in `api_version` (those already in it unchanged), in order."""


class CustomResourceStrategy(Strategy):
    """One custom resource's rules, from its CRD (`crd`) and stored version (`info`);
    `converter` converts its objects between the CRD's versions."""

    def __init__(self, info: KindInfo, crd: ObjView, converter: Converter | None = None
                 ) -> None:
        super().__init__(info.kind)
        self.info = info
        self.crd = crd
        self.converter = converter
        self.schema = crds.schema_of(crd, info.version) or {}
        subresources = crds.subresources_of(crd, info.version) or {}
        self.status_enabled = "status" in subresources
        scale = subresources.get("scale")
        self.scale = scale if isinstance(scale, dict) else None
        self.printer_columns = list(crds.printer_columns_of(crd, info.version) or [])

    @property
    def generation(self) -> bool:
        return True  # every custom object counts its generation

    def serves(self, subresource: str) -> bool:
        return subresource == "" or (subresource == "status" and self.status_enabled)

    def spec_changed(self, old: Obj, new: Obj) -> bool:
        """A change that bumps `metadata.generation`: anything but metadata (and, with the
        status subresource, status)."""
        skip = {"metadata", "apiVersion", "kind", *(("status",) if self.status_enabled
                                                    else ())}
        return ({k: v for k, v in old.items() if k not in skip}
                != {k: v for k, v in new.items() if k not in skip})

    def default(self, obj: Obj) -> None:
        drop_nulls_without_defaults(self.schema, obj)  # as kube does to request bodies
        default_custom_object(self.schema, obj)

    def prune_unknown(self, obj: Obj) -> list[str]:
        return prune_custom_object(self.schema, obj)

    def _validate(self, obj: ObjView, old: ObjView | None) -> list[FieldError]:
        errors: list[FieldError] = []
        api_version = obj.get("apiVersion")
        if api_version is not None and api_version != self.info.api_version:
            errors.append(not_supported("apiVersion", api_version, [self.info.api_version]))
        errors += validate_metadata(obj, self.kind, "metadata",
                                    namespaced=self.info.namespaced,
                                    name_check=dns1123_subdomain_problems)
        if old is not None:
            errors += validate_metadata_update(obj, old)
        return errors + validate_custom_object(self.schema, obj, old=old)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return self._validate(obj, None)

    def validate_update(self, new: Obj, old: Obj, *, subresource: str) -> list[FieldError]:
        return self._validate(new, old)

    async def before_write(self, info: KindInfo, obj: Obj, old: Obj | None, *,
                           request_name: str | None) -> None:
        if old is None and (self.crd.get("metadata") or {}).get("deletionTimestamp"):
            raise ApiError(Reason.METHOD_NOT_ALLOWED,
                           "create not allowed while custom resource definition is "
                           "terminating")

    def prepare_for_create(self, obj: Obj) -> None:
        if self.status_enabled:
            obj.pop("status", None)  # written only through the status subresource

    def field_labels(self) -> KindFieldLabels:
        """metadata.name, metadata.namespace and the CRD's `selectableFields` (EX2)."""
        fields: dict[str, Any] = {NAME: at(NAME), NAMESPACE: at(NAMESPACE)}
        for path in crds.selectable_fields_of(self.crd, self.info.version):
            fields[path.lstrip(".")] = _selectable(path)
        return KindFieldLabels(fields, own_conversion=False)

    # -- scale ---------------------------------------------------------------------------

    def scale_paths(self) -> tuple[str, str, str] | None:
        """(specReplicasPath, statusReplicasPath, labelSelectorPath) when the CRD serves
        the scale subresource."""
        if self.scale is None:
            return None
        return (str(self.scale.get("specReplicasPath") or ""),
                str(self.scale.get("statusReplicasPath") or ""),
                str(self.scale.get("labelSelectorPath") or ""))

    # -- printing ------------------------------------------------------------------------

    def columns(self, *, wide: bool) -> list[Column]:
        cols: list[Column] = [("NAME", meta("name"))]
        if not self.printer_columns:
            return [*cols, ("AGE", age_column)]
        for column in self.printer_columns:
            if not wide and int(column.get("priority") or 0) > 0:
                continue
            cols.append((str(column.get("name", "")), _cell(column)))
        return cols

    def kubectl_columns(self) -> set[str]:
        if not self.printer_columns:
            return {"NAME", "AGE"}
        return {"NAME", *(str(c.get("name", "")) for c in self.printer_columns
                          if not int(c.get("priority") or 0))}


def _cell(column: ObjView) -> Any:
    """A printer column's cell: its JSON path's values as kube-apiserver prints them
    (a date as an age; several values joined by commas; none: empty)."""
    path, kind = str(column.get("jsonPath") or ""), str(column.get("type") or "string")

    def render(obj: Obj) -> str:
        try:
            values = jsonpath.find(obj, path)
        except jsonpath.JsonPathError:
            return ""
        if not values:
            return "<none>" if kind != "date" else "<unknown>"
        if kind == "date" and isinstance(values[0], str):
            return age(values[0])
        return ",".join(_text(v) for v in values)
    return render


def _selectable(path: str) -> Any:
    def value(obj: ObjView) -> str:
        try:
            found = jsonpath.first(obj, path)
        except jsonpath.JsonPathError:
            return ""
        return "" if found is None else _text(found)
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
