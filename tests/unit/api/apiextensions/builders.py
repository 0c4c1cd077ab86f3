"""Test builders for CRDs and their schemas, and the real-CRD fixtures."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parent / "fixtures"

SIMPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "minimum": 1},
                "image": {"type": "string"},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "integer"}}},
    },
}


def make_version(name: str = "v1", *, storage: bool = True, served: bool = True,
                 schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": name, "served": served, "storage": storage,
        "schema": {"openAPIV3Schema": copy.deepcopy(schema or SIMPLE_SCHEMA)},
    }
    version.update(extra)
    return version


def make_crd(*, group: str = "example.com", plural: str = "widgets", kind: str = "Widget",
             scope: str = "Namespaced", versions: list[dict[str, Any]] | None = None,
             schema: dict[str, Any] | None = None, **names: Any) -> dict[str, Any]:
    """A valid, defaulted v1 CRD unless the arguments say otherwise."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                      "listKind": f"{kind}List", **names},
            "versions": versions if versions is not None else [make_version(schema=schema)],
            "conversion": {"strategy": "None"},
        },
    }


def load_fixture(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(CRD, example object) from `fixtures/<name>.yaml`."""
    crd, obj = yaml.safe_load_all((FIXTURES / f"{name}.yaml").read_text())
    return crd, obj


def messages(errors: list[Any]) -> list[str]:
    return [str(e) for e in errors]
