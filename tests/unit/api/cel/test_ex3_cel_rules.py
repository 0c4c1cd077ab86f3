"""SPEC EX3: a custom object checked against its CRD's `x-kubernetes-validations` rules,
with Kubernetes' messages and field paths."""

from __future__ import annotations

from typing import Any

from skiff.api.apiextensions.cel import validate_rules
from skiff.api.errors import ApiError


def _schema(spec_props: dict[str, Any], spec_rules: list[dict[str, Any]] | None = None,
            **spec_extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "object", "properties": spec_props, **spec_extra}
    if spec_rules:
        spec["x-kubernetes-validations"] = spec_rules
    return {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"}, "spec": spec}}


def _obj(spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Web", "metadata": {"name": name},
            "spec": spec}


def _texts(schema: dict[str, Any], obj: dict[str, Any],
           old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_rules(schema, obj, old)]


REPLICAS = _schema({"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}},
                   [{"rule": "self.replicas <= self.maxReplicas",
                     "message": "replicas must not exceed maxReplicas"}])


def test_ex3_cel_rule_refuses_replicas_above_max() -> None:
    assert _texts(REPLICAS, _obj({"replicas": 5, "maxReplicas": 3})) == [
        'spec: Invalid value: "object": replicas must not exceed maxReplicas']
    assert _texts(REPLICAS, _obj({"replicas": 3, "maxReplicas": 3})) == []


def test_ex3_cel_rule_error_reads_as_kubectl_shows_it() -> None:
    errs = validate_rules(REPLICAS, _obj({"replicas": 5, "maxReplicas": 3}), None)
    err = ApiError.invalid("Web", "web", errs, group="example.com")
    assert err.message == ('Web.example.com "web" is invalid: spec: Invalid value: "object": '
                           'replicas must not exceed maxReplicas')
    assert err.to_status()["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec",
        "message": 'Invalid value: "object": replicas must not exceed maxReplicas'}]


def test_ex3_cel_rule_without_message_says_failed_rule() -> None:
    schema = _schema({"replicas": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >= 1"}]}})
    assert _texts(schema, _obj({"replicas": 0})) == [
        'spec.replicas: Invalid value: "integer": failed rule: self >= 1']


def test_ex3_cel_rule_on_the_root_reports_nil_path() -> None:
    schema = {**REPLICAS, "x-kubernetes-validations": [
        {"rule": "self.metadata.name.startsWith('web-')"}]}
    assert _texts(schema, _obj({"replicas": 1, "maxReplicas": 2}, name="db")) == [
        "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('web-')"]


def test_ex3_cel_rule_sees_only_name_and_generate_name_of_metadata() -> None:
    schema = {**REPLICAS, "x-kubernetes-validations": [{"rule": "has(self.metadata.labels)"}]}
    obj = _obj({"replicas": 1, "maxReplicas": 2})
    obj["metadata"]["labels"] = {"a": "b"}
    assert _texts(schema, obj) == [
        '<nil>: Invalid value: "object": failed rule: has(self.metadata.labels)']


def test_ex3_cel_transition_rule_makes_a_field_immutable() -> None:
    schema = _schema({"name": {"type": "string", "x-kubernetes-validations": [
        {"rule": "self == oldSelf", "message": "Value is immutable"}]}})
    # create: no old object, the transition rule does not run
    assert _texts(schema, _obj({"name": "a"})) == []
    assert _texts(schema, _obj({"name": "a"}), _obj({"name": "a"})) == []
    assert _texts(schema, _obj({"name": "b"}), _obj({"name": "a"})) == [
        'spec.name: Invalid value: "string": Value is immutable']
    # the field is new in this update: no old value at that path, the rule does not run
    assert _texts(schema, _obj({"name": "b"}), _obj({})) == []


def test_ex3_cel_transition_rule_on_list_map_items_matches_by_key() -> None:
    schema = _schema({"ports": {
        "type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "port": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port",
                                          "message": "port is immutable"}]}}})
    old = _obj({"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]})
    reordered = _obj({"ports": [{"name": "https", "port": 443}, {"name": "http", "port": 80},
                                {"name": "new", "port": 1}]})
    assert _texts(schema, reordered, old) == []
    changed = _obj({"ports": [{"name": "https", "port": 8443}]})
    assert _texts(schema, changed, old) == [
        'spec.ports[0]: Invalid value: "object": port is immutable']


def test_ex3_cel_rule_on_list_items_and_map_values() -> None:
    schema = _schema({
        "hosts": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.endsWith('.example.com')"}]}},
        "limits": {"type": "object", "additionalProperties": {
            "type": "integer", "x-kubernetes-validations": [
                {"rule": "self < 100", "message": "too large"}]}}})
    obj = _obj({"hosts": ["a.example.com", "b.other.org"], "limits": {"cpu": 4, "mem": 500}})
    assert _texts(schema, obj) == [
        "spec.hosts[1]: Invalid value: \"string\": failed rule: self.endsWith('.example.com')",
        'spec.limits[mem]: Invalid value: "integer": too large']


def test_ex3_cel_message_expression() -> None:
    schema = _schema({"replicas": {"type": "integer"}}, [
        {"rule": "self.replicas < 10",
         "messageExpression": "'replicas must be below 10, got ' + string(self.replicas)"}])
    assert _texts(schema, _obj({"replicas": 12})) == [
        'spec: Invalid value: "object": replicas must be below 10, got 12']


def test_ex3_cel_message_expression_that_fails_falls_back_to_message() -> None:
    failing = _schema({"replicas": {"type": "integer"}}, [
        {"rule": "self.replicas < 10", "message": "too many replicas",
         "messageExpression": "'got ' + string(self.missing)"}])
    assert _texts(failing, _obj({"replicas": 12})) == [
        'spec: Invalid value: "object": too many replicas']
    empty = _schema({"replicas": {"type": "integer"}}, [
        {"rule": "self.replicas < 10", "messageExpression": "'  '"}])
    assert _texts(empty, _obj({"replicas": 12})) == [
        'spec: Invalid value: "object": failed rule: self.replicas < 10']


def test_ex3_cel_field_path_and_reason() -> None:
    schema = _schema({"replicas": {"type": "integer"}, "tier": {"type": "string"}}, [
        {"rule": "self.replicas < 10", "fieldPath": ".replicas", "message": "too many",
         "reason": "FieldValueForbidden"},
        {"rule": "has(self.tier)", "fieldPath": ".tier", "message": "tier is required",
         "reason": "FieldValueRequired"},
        {"rule": "self.replicas != 11", "reason": "FieldValueDuplicate"}])
    assert _texts(schema, _obj({"replicas": 11})) == [
        "spec.replicas: Forbidden: too many",
        "spec.tier: Required value: tier is required",
        'spec: Duplicate value: "object"']
    causes = [e.cause_type for e in validate_rules(schema, _obj({"replicas": 11}), None)]
    assert causes == ["FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"]


def test_ex3_cel_runtime_error_is_reported_as_kubernetes_words_it() -> None:
    schema = _schema({"a": {"type": "integer"}, "b": {"type": "integer"}}, [
        {"rule": "self.a / self.b > 1"}, {"rule": "self.c == 1"}])
    assert _texts(schema, _obj({"a": 1, "b": 0})) == [
        'spec: Invalid value: "object": division by zero evaluating rule: self.a / self.b > 1',
        'spec: Invalid value: "object": no such key: c evaluating rule: self.c == 1']


def test_ex3_cel_int_or_string_mismatch_is_no_such_overload() -> None:
    schema = _schema({"port": {"x-kubernetes-int-or-string": True,
                               "x-kubernetes-validations": [{"rule": "self > 0"}]}})
    assert _texts(schema, _obj({"port": 80})) == []
    assert _texts(schema, _obj({"port": "http"})) == [
        "spec.port: Invalid value: \"\": 'no such overload': call arguments did not match a "
        "supported operator, function or macro signature for rule: self > 0"]


def test_ex3_cel_typed_values_numbers_dates_durations_and_escaped_names() -> None:
    schema = _schema({
        "ratio": {"type": "number"},
        "expires": {"type": "string", "format": "date-time"},
        "timeout": {"type": "string", "format": "duration"},
        "x-name": {"type": "string"},
        "namespace": {"type": "string"}}, [
        {"rule": "self.ratio == 2.0 && type(self.ratio) == double"},
        {"rule": "self.expires > timestamp('2024-01-01T00:00:00Z')"},
        {"rule": "self.timeout <= duration('1h')"},
        {"rule": "self.x__dash__name == 'a' && self.__namespace__ == 'b'"}])
    good = _obj({"ratio": 2, "expires": "2025-05-01T10:00:00Z", "timeout": "30m",
                 "x-name": "a", "namespace": "b"})
    assert _texts(schema, good) == []
    late = _obj({"ratio": 2, "expires": "2023-05-01T10:00:00Z", "timeout": "2h",
                 "x-name": "a", "namespace": "b"})
    assert _texts(schema, late) == [
        "spec: Invalid value: \"object\": failed rule: "
        "self.expires > timestamp('2024-01-01T00:00:00Z')",
        "spec: Invalid value: \"object\": failed rule: self.timeout <= duration('1h')"]


def test_ex3_cel_optional_old_self_runs_on_create_too() -> None:
    schema = _schema({"size": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
         "message": "size may only grow", "optionalOldSelf": True},
        {"rule": "oldSelf.hasValue() || self <= 10", "message": "start at most 10",
         "optionalOldSelf": True}]}})
    assert _texts(schema, _obj({"size": 50})) == [
        'spec.size: Invalid value: "integer": start at most 10']
    assert _texts(schema, _obj({"size": 50}), _obj({"size": 40})) == []
    assert _texts(schema, _obj({"size": 30}), _obj({"size": 40})) == [
        'spec.size: Invalid value: "integer": size may only grow']


def test_ex3_cel_rule_in_all_of_runs_at_its_node() -> None:
    schema = _schema({"a": {"type": "integer"}},
                     allOf=[{"x-kubernetes-validations": [{"rule": "self.a > 1"}]}])
    assert _texts(schema, _obj({"a": 1})) == [
        'spec: Invalid value: "object": failed rule: self.a > 1']


def test_ex3_cel_rule_skips_null_and_absent_values() -> None:
    schema = _schema({"a": {"type": "integer", "nullable": True,
                            "x-kubernetes-validations": [{"rule": "self > 1"}]}})
    assert _texts(schema, _obj({"a": None})) == []
    assert _texts(schema, _obj({})) == []


def test_ex3_cel_unchanged_value_is_not_refused_by_a_tightened_rule() -> None:
    schema = _schema({"replicas": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self <= 5", "message": "at most 5"}]},
        "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.size() <= 3"}]}},
        "owner": {"type": "string"}})
    stored = _obj({"replicas": 9, "tags": ["long-tag"], "owner": "a"})
    # an update touching another field keeps the old, now-invalid values (ratcheting)
    assert _texts(schema, _obj({"replicas": 9, "tags": ["long-tag"], "owner": "b"}),
                  stored) == []
    # a changed value is checked
    assert _texts(schema, _obj({"replicas": 10, "tags": ["long-tag", "x"], "owner": "b"}),
                  stored) == [
        'spec.replicas: Invalid value: "integer": at most 5',
        'spec.tags[0]: Invalid value: "string": failed rule: self.size() <= 3']
    # on create nothing is ratcheted
    assert _texts(schema, stored) == [
        'spec.replicas: Invalid value: "integer": at most 5',
        'spec.tags[0]: Invalid value: "string": failed rule: self.size() <= 3']


def test_ex3_cel_rule_is_not_run_on_a_value_the_schema_refuses() -> None:
    schema = _schema({"replicas": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >= 1"}]}})
    assert _texts(schema, _obj({"replicas": "three"})) == []
