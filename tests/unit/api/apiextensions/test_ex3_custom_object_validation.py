"""SPEC EX3: a custom object is validated against its version's schema with the messages and
field paths kube-apiserver prints (kube-openapi's validator, list types, embedded resources)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.apiextensions.structural import validate_custom_object
from skiff.api.apiextensions.values import go_number

from .builders import messages


def cr(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"}, "spec": spec}


def with_spec(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {
        "spec": {"type": "object", "properties": properties}}}


def errors_of(spec_schema: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    return messages(validate_custom_object(with_spec(**spec_schema), cr(**spec)))


@pytest.mark.parametrize(("props", "spec", "expected"), [
    pytest.param({"replicas": {"type": "integer"}}, {"replicas": "string"},
                 ['spec.replicas: Invalid value: "string": spec.replicas in body must be of '
                  'type integer: "string"'], id="type"),
    pytest.param({"replicas": {"type": "integer"}}, {"replicas": 1.5},
                 ['spec.replicas: Invalid value: "number": spec.replicas in body must be of '
                  'type integer: "number"'], id="number-is-not-integer"),
    pytest.param({"replicas": {"type": "integer"}}, {"replicas": 2.0}, [],
                 id="integral-number-is-integer"),
    pytest.param({"ratio": {"type": "number"}}, {"ratio": 2}, [], id="integer-is-number"),
    pytest.param({"name": {"type": "string"}}, {"name": None},
                 ['spec.name: Invalid value: "null": spec.name in body must be of type string: '
                  '"null"'], id="null"),
    pytest.param({"name": {"type": "string", "nullable": True}}, {"name": None}, [],
                 id="nullable"),
    pytest.param({"mode": {"type": "string", "enum": ["a", "b"]}}, {"mode": "x"},
                 ['spec.mode: Unsupported value: "x": supported values: "a", "b"'], id="enum"),
    pytest.param({"mode": {"type": "string", "nullable": True, "enum": ["a"]}}, {"mode": None},
                 ['spec.mode: Unsupported value: "null": supported values: "a"'],
                 id="nullable-enum-null"),
    pytest.param({"replicas": {"type": "integer", "minimum": 1}}, {"replicas": 0},
                 ["spec.replicas: Invalid value: 0: spec.replicas in body should be greater "
                  "than or equal to 1"], id="minimum"),
    pytest.param({"replicas": {"type": "integer", "maximum": 10, "exclusiveMaximum": True}},
                 {"replicas": 10},
                 ["spec.replicas: Invalid value: 10: spec.replicas in body should be less than "
                  "10"], id="exclusive-maximum"),
    pytest.param({"step": {"type": "integer", "multipleOf": 5}}, {"step": 7},
                 ["spec.step: Invalid value: 7: spec.step in body should be a multiple of 5"],
                 id="multiple-of"),
    pytest.param({"name": {"type": "string", "pattern": "^[a-z]+$"}}, {"name": "A1"},
                 ['spec.name: Invalid value: "A1": spec.name in body should match '
                  "'^[a-z]+$'"], id="pattern"),
    pytest.param({"name": {"type": "string", "maxLength": 3}}, {"name": "abcd"},
                 ["spec.name: Too long: may not be more than 3 bytes"], id="max-length"),
    pytest.param({"name": {"type": "string", "minLength": 3}}, {"name": "ab"},
                 ['spec.name: Invalid value: "ab": spec.name in body should be at least 3 '
                  "chars long"], id="min-length"),
    pytest.param({"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
                 {"tags": ["a", "b", "c"]},
                 ["spec.tags: Too many: 3: must have at most 2 items"], id="max-items"),
    pytest.param({"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                 {"tags": []},
                 ["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"],
                 id="min-items"),
    pytest.param({"tags": {"type": "array", "items": {"type": "string"}}}, {"tags": ["a", 1]},
                 ['spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type '
                  'string: "integer"'], id="array-item-path"),
    pytest.param({"labels": {"type": "object", "additionalProperties": {"type": "string"},
                             "maxProperties": 1}},
                 {"labels": {"a": "1", "b": 2}},
                 ["spec.labels: Too many: 2: must have at most 1 item",
                  'spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of '
                  'type string: "integer"'], id="additional-properties"),
    pytest.param({"ref": {"type": "object", "required": ["name"],
                          "properties": {"name": {"type": "string"}}}}, {"ref": {}},
                 ["spec.ref.name: Required value"], id="required"),
    pytest.param({"port": {"x-kubernetes-int-or-string": True,
                           "anyOf": [{"type": "integer"}, {"type": "string"}]}},
                 {"port": True},
                 ['spec.port: Invalid value: "boolean": spec.port in body must be of type '
                  'integer,string: "boolean"',
                  '<nil>: Invalid value: "": "spec.port" must validate at least one schema '
                  "(anyOf)",
                  'spec.port: Invalid value: "boolean": spec.port in body must be of type '
                  'integer: "boolean"'], id="int-or-string"),
    pytest.param({"port": {"x-kubernetes-int-or-string": True}}, {"port": "http"}, [],
                 id="int-or-string-string"),
    pytest.param({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                 {"free": {"anything": [1, {"x": None}]}}, [], id="preserve-unknown-fields"),
])
def test_ex3_custom_object_value_checks(props: dict[str, Any], spec: dict[str, Any],
                                        expected: list[str]) -> None:
    assert errors_of(props, spec) == expected


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    pytest.param("date", "2024-02-29", "2023-02-29", id="date"),
    pytest.param("date-time", "2024-01-02T03:04:05Z", "yesterday", id="date-time"),
    pytest.param("byte", "aGVsbG8=", "not base64!", id="byte"),
    pytest.param("uuid", "123e4567-e89b-12d3-a456-426614174000", "123", id="uuid"),
    pytest.param("ipv4", "10.0.0.1", "10.0.0.256", id="ipv4"),
    pytest.param("cidr", "10.0.0.0/8", "10.0.0.0", id="cidr"),
    pytest.param("duration", "1h30m", "soon", id="duration"),
])
def test_ex3_custom_object_string_formats(fmt: str, good: str, bad: str) -> None:
    props = {"v": {"type": "string", "format": fmt}}
    assert errors_of(props, {"v": good}) == []
    assert errors_of(props, {"v": bad}) == [
        f'spec.v: Invalid value: "{bad}": spec.v in body must be of type {fmt}: "{bad}"']


def test_ex3_unknown_formats_are_ignored_as_kube_strips_them() -> None:
    assert errors_of({"v": {"type": "string", "format": "color"}}, {"v": "blue"}) == []


def test_ex3_list_type_set_refuses_duplicates() -> None:
    props = {"tags": {"type": "array", "items": {"type": "string"},
                      "x-kubernetes-list-type": "set"}}
    assert errors_of(props, {"tags": ["a", "b", "a", "a"]}) == [
        'spec.tags[2]: Duplicate value: "a"']


def test_ex3_list_type_map_refuses_duplicate_keys() -> None:
    props = {"ports": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["name", "protocol"],
                       "items": {"type": "object", "required": ["name", "protocol"],
                                 "properties": {"name": {"type": "string"},
                                                "protocol": {"type": "string"},
                                                "port": {"type": "integer"}}}}}
    spec = {"ports": [{"name": "http", "protocol": "TCP", "port": 80},
                      {"name": "http", "protocol": "UDP", "port": 80},
                      {"name": "http", "protocol": "TCP", "port": 8080}]}
    assert errors_of(props, spec) == [
        'spec.ports[2]: Duplicate value: {"name": "http", "protocol": "TCP"}']


def test_ex3_embedded_resource_needs_api_version_and_kind() -> None:
    props = {"template": {"type": "object", "x-kubernetes-embedded-resource": True,
                          "x-kubernetes-preserve-unknown-fields": True}}
    assert errors_of(props, {"template": {"metadata": {"name": "a/b"}}}) == [
        "spec.template.apiVersion: Required value",
        "spec.template.kind: Required value",
        "spec.template.metadata.name: Invalid value: \"a/b\": may not contain '/'",
    ]
    assert errors_of(props, {"template": {"apiVersion": "v1", "kind": "Pod",
                                          "metadata": {"name": "p"}}}) == []


def test_ex3_root_type_meta_is_not_checked_by_the_schema() -> None:
    schema = with_spec(replicas={"type": "integer"})
    obj = {"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "anything": 1}, "spec": {"replicas": 1}}
    assert validate_custom_object(schema, obj) == []


def test_ex3_composite_one_of() -> None:
    schema = with_spec()
    schema["properties"]["spec"]["oneOf"] = [{"required": ["a"]}, {"required": ["b"]}]
    schema["properties"]["spec"]["properties"] = {"a": {"type": "string"},
                                                  "b": {"type": "string"}}
    found = messages(validate_custom_object(schema, cr(a="x", b="y")))
    assert found == ['<nil>: Invalid value: "": "spec" must validate one and only one schema '
                     "(oneOf). Found 2 valid alternatives"]
    assert validate_custom_object(schema, cr(a="x")) == []


@pytest.mark.parametrize(("value", "shown"), [
    (1, "1"), (1.5, "1.5"), (100000, "100000"), (1000000, "1e+06"), (0.0001, "0.0001"),
    (0.00001, "1e-05"), (-2.25, "-2.25"), (1234567, "1.234567e+06"),
])
def test_ex3_bounds_print_as_go_floats(value: float, shown: str) -> None:
    assert go_number(value) == shown


def test_ex3_cel_rules_run_after_the_schema_checks() -> None:
    schema = with_spec(replicas={"type": "integer", "minimum": 0})
    schema["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self.replicas <= 10"},
        {"rule": "self.replicas == oldSelf.replicas", "message": "replicas is immutable"}]
    assert messages(validate_custom_object(schema, cr(replicas=-1))) == [
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or "
        "equal to 0"]
    assert messages(validate_custom_object(schema, cr(replicas=11))) == [
        'spec: Invalid value: "object": failed rule: self.replicas <= 10']
    assert messages(validate_custom_object(schema, cr(replicas=5), old=cr(replicas=4))) == [
        'spec: Invalid value: "object": replicas is immutable']


def test_ex3_cel_rules_wait_for_blocking_schema_errors() -> None:
    schema = with_spec(replicas={"type": "integer"})
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.replicas <= 10"}]
    found = validate_custom_object(schema, cr(replicas="eleven"))
    assert messages(found) == [
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type '
        'integer: "string"',
        '<nil>: Invalid value: "null": some validation rules were not checked because the '
        "object was invalid; correct the existing errors to complete validation"]
    assert found[0].cause_type == "FieldValueTypeInvalid"


def test_ex3_list_duplicates_the_old_object_had_are_tolerated_on_update() -> None:
    schema = with_spec(tags={"type": "array", "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"})
    assert validate_custom_object(schema, cr(tags=["a", "a", "b"]),
                                  old=cr(tags=["a", "a"])) == []
    assert messages(validate_custom_object(schema, cr(tags=["a", "a"]), old=cr(tags=["a"]))) == [
        'spec.tags[1]: Duplicate value: "a"']


@pytest.mark.parametrize(("pattern", "good", "bad"), [
    # prometheus-operator's AlertmanagerConfig weekdays: RE2 flags last to the group's end
    pytest.param("^((?i)sun|mon|tues|wednes|thurs|fri|satur)day(?:((:(sun|mon|tues|wednes|"
                 "thurs|fri|satur)day)$)|$)", "MONday", "someday", id="flag-in-group"),
    pytest.param("^(?i)(abort|warn)?$", "WARN", "panic", id="flag-after-anchor"),
    pytest.param("^[[:alpha:]]+\\z", "abc", "abc1", id="posix-class-and-z"),
])
def test_ex3_patterns_are_go_regular_expressions(pattern: str, good: str, bad: str) -> None:
    props = {"v": {"type": "string", "pattern": pattern}}
    assert errors_of(props, {"v": good}) == []
    assert errors_of(props, {"v": bad}) == [
        f"spec.v: Invalid value: \"{bad}\": spec.v in body should match '{pattern}'"]
