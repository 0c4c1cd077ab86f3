"""SPEC EX3: unknown fields are pruned (their paths reported as kube reports them, for
`fieldValidation`), and schema defaults are applied as kube-apiserver applies them."""

from __future__ import annotations

import copy
from typing import Any

from skiff.api.apiextensions.structural import (
    default_custom_object,
    drop_nulls_without_defaults,
    prune_custom_object,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"},
                                   "weight": {"type": "integer", "default": 10}}}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"value": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"known": {"type": "object",
                                                  "properties": {"a": {"type": "string"}}}}},
                "port": {"x-kubernetes-int-or-string": True},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object",
                                                     "properties": {"x": {"type": "string"}}}}},
                "tolerance": {"type": "string", "nullable": True, "default": "low"},
                "mode": {"type": "string"},
                "config": {"type": "object", "default": {"level": "info"},
                           "properties": {"level": {"type": "string"},
                                          "format": {"type": "string", "default": "json"}}},
            },
        },
    },
}


def test_ex3_pruning_drops_unknown_fields_and_reports_their_paths() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "extra": 1,
        "spec": {
            "replicas": 2, "bogus": True,
            "items": [{"name": "a", "colour": "red"}, {"name": "b"}],
            "labels": {"x": {"value": "1", "junk": 2}},
            "free": {"whatever": {"deep": 1}, "known": {"a": "1", "b": "2"}},
            "port": 8080,
            "template": {"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "bogusMeta": 1},
                         "spec": {"x": "1", "y": "2"}, "status": {}},
        },
    }
    dropped = prune_custom_object(SCHEMA, obj)
    assert dropped == [
        "extra", "spec.bogus", "spec.free.known.b", "spec.items[0].colour",
        "spec.labels.x.junk", "spec.template.metadata.bogusMeta", "spec.template.spec.y",
        "spec.template.status",
    ]
    assert obj["metadata"] == {"name": "w", "labels": {"a": "b"}}
    assert obj["spec"]["free"] == {"whatever": {"deep": 1}, "known": {"a": "1"}}
    assert obj["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": "p"}, "spec": {"x": "1"}}
    assert obj["spec"]["items"] == [{"name": "a"}, {"name": "b"}]


def test_ex3_pruning_keeps_a_valid_object_unchanged() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": {"replicas": 1, "mode": "x"}}
    before = copy.deepcopy(obj)
    assert prune_custom_object(SCHEMA, obj) == []
    assert obj == before


def test_ex3_defaults_fill_missing_fields_items_and_objects() -> None:
    obj: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": "w"},
                           "spec": {"items": [{"name": "a"}, {"name": "b", "weight": 3}]}}
    default_custom_object(SCHEMA, obj)
    assert obj["spec"]["replicas"] == 1
    assert obj["spec"]["items"] == [{"name": "a", "weight": 10}, {"name": "b", "weight": 3}]
    # a defaulted object is defaulted inside too
    assert obj["spec"]["config"] == {"level": "info", "format": "json"}
    assert obj["spec"]["tolerance"] == "low"


def test_ex3_default_is_a_copy_per_object() -> None:
    first: dict[str, Any] = {"spec": {}}
    second: dict[str, Any] = {"spec": {}}
    default_custom_object(SCHEMA, first)
    default_custom_object(SCHEMA, second)
    first["spec"]["config"]["level"] = "debug"
    assert second["spec"]["config"]["level"] == "info"
    assert SCHEMA["properties"]["spec"]["properties"]["config"]["default"] == {"level": "info"}


def test_ex3_null_is_defaulted_unless_nullable() -> None:
    obj: dict[str, Any] = {"spec": {"replicas": None, "tolerance": None}}
    default_custom_object(SCHEMA, obj)
    assert obj["spec"]["replicas"] == 1
    assert obj["spec"]["tolerance"] is None


def test_ex3_null_without_default_is_dropped_from_requests() -> None:
    obj: dict[str, Any] = {"spec": {"mode": None, "tolerance": None, "replicas": None}}
    drop_nulls_without_defaults(SCHEMA, obj)
    assert obj == {"spec": {"tolerance": None, "replicas": None}}


def test_ex3_embedded_metadata_keeps_only_well_formed_object_meta() -> None:
    obj: dict[str, Any] = {"spec": {"template": {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": 1}, "annotations": {"b": "c"},
                     "generation": 0, "creationTimestamp": None, "colour": "red"},
        "spec": {"x": "1"}}}}
    assert prune_custom_object(SCHEMA, obj) == ["spec.template.metadata.colour"]
    assert obj["spec"]["template"]["metadata"] == {"name": "p", "annotations": {"b": "c"}}
def test_ex3_a_root_that_preserves_unknown_fields_keeps_them() -> None:
    """Found by the HPA work: `{type: object, x-kubernetes-preserve-unknown-fields: true}` at
    the root dropped `spec` and every other top-level field on create."""
    obj = {"apiVersion": "a.example.com/v1", "kind": "K", "metadata": {"name": "x"},
           "spec": {"replicas": 1, "free": {"form": True}}}
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
              "properties": {"spec": {"type": "object",
                                      "properties": {"replicas": {"type": "integer"}}}}}
    assert prune_custom_object(schema, obj) == ["spec.free"]
    assert obj["spec"] == {"replicas": 1}
    open_root = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    kept = {"apiVersion": "a.example.com/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"anything": [1, 2]}, "extra": "yes"}
    assert prune_custom_object(open_root, kept) == []
    assert kept["spec"] == {"anything": [1, 2]}
    assert kept["extra"] == "yes"
