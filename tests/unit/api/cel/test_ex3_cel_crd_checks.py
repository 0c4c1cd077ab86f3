"""SPEC EX3: a CRD's `x-kubernetes-validations` checked when the CRD is written: each
rule's fields, and each rule and messageExpression compiled, with Kubernetes' paths."""

from __future__ import annotations

from typing import Any

from skiff.api.apiextensions.cel import check_schema_rules

BASE = "spec.versions[0].schema.openAPIV3Schema"


def _spec(rules: list[dict[str, Any]], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {
        "type": "object", "properties": props or {"replicas": {"type": "integer"}},
        "x-kubernetes-validations": rules}}}


def _texts(schema: dict[str, Any]) -> list[str]:
    return [str(e) for e in check_schema_rules(schema, path=BASE)]


def test_ex3_cel_good_rules_pass_the_crd_check() -> None:
    assert _texts(_spec([
        {"rule": "self.replicas <= 10", "message": "at most 10"},
        {"rule": "self.replicas >= 0",
         "messageExpression": "'got ' + string(self.replicas)"},
        {"rule": "self == oldSelf", "fieldPath": ".replicas", "reason": "FieldValueForbidden"},
    ])) == []


def test_ex3_cel_rule_that_does_not_compile_is_refused() -> None:
    assert _texts(_spec([{"rule": "self.replicas <= "}])) == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.replicas <= ", Message:"", '
        'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
        'FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: '
        "<input>:1:18: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', "
        "'-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
        "IDENTIFIER}\n | self.replicas <= \n | .................^"]


def test_ex3_cel_type_error_is_refused_with_the_checker_message() -> None:
    schema = _spec([{"rule": "self + 'a' == 'b'"}], replicas={"type": "integer"})
    schema["properties"]["spec"]["properties"]["replicas"]["x-kubernetes-validations"] = [
        {"rule": "self + 'a' == 'b'"}]
    texts = _texts(schema)
    assert texts[-1].startswith(
        f"{BASE}.properties[spec].properties[replicas].x-kubernetes-validations[0].rule: "
        "Invalid value: apiextensions.ValidationRule{")
    assert texts[-1].endswith(
        "compilation failed: ERROR: <input>:1:6: found no matching overload for '_+_' "
        "applied to '(int, string)'\n | self + 'a' == 'b'\n | .....^")


def test_ex3_cel_rule_must_be_a_bool_and_message_expression_a_string() -> None:
    texts = _texts(_spec([{"rule": "1 + 1"},
                          {"rule": "true", "messageExpression": "42"},
                          {"rule": "true", "messageExpression": "'a' +"}]))
    assert [t.split(": Invalid value: ")[0] for t in texts] == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule",
        f"{BASE}.properties[spec].x-kubernetes-validations[1].messageExpression",
        f"{BASE}.properties[spec].x-kubernetes-validations[2].messageExpression"]
    assert texts[0].endswith("}: cel expression must evaluate to a bool")
    assert texts[1].endswith("}: messageExpression must evaluate to a string")
    assert "}: messageExpression compilation failed: ERROR: <input>:1:" in texts[2]


def test_ex3_cel_rule_fields_are_checked() -> None:
    assert _texts(_spec([
        {"rule": " "},
        {"rule": "true", "message": "two\nlines"},
        {"rule": "true", "reason": "FieldValueOdd"},
        {"rule": "true", "fieldPath": ".nosuch"},
        {"rule": "true", "messageExpression": "  "},
        {"rule": "self.replicas > 0\n&& true"},
    ])) == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Required value: "
        "rule is not specified",
        f"{BASE}.properties[spec].x-kubernetes-validations[1].message: Invalid value: "
        '"two\\nlines": message must not contain line breaks',
        f"{BASE}.properties[spec].x-kubernetes-validations[2].reason: Unsupported value: "
        '"FieldValueOdd": supported values: "FieldValueDuplicate", "FieldValueForbidden", '
        '"FieldValueInvalid", "FieldValueRequired"',
        f"{BASE}.properties[spec].x-kubernetes-validations[3].fieldPath: Invalid value: "
        '".nosuch": fieldPath must be a valid path',
        f"{BASE}.properties[spec].x-kubernetes-validations[4].messageExpression: Required "
        "value: messageExpression must be non-empty if specified",
        f"{BASE}.properties[spec].x-kubernetes-validations[5].message: Required value: "
        "message must be specified if rule contains line breaks",
    ]


def test_ex3_cel_old_self_refused_under_a_list_that_is_not_a_map() -> None:
    schema = _spec([{"rule": "true"}], items={"type": "array", "items": {
        "type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}})
    assert _texts(schema) == [
        f"{BASE}.properties[spec].properties[items].items.x-kubernetes-validations[0].rule: "
        'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable '
        f"portion of the schema within {BASE}.properties[spec].properties[items]"]
    schema["properties"]["spec"]["properties"]["items"].update({
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}},
                  "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}})
    assert _texts(schema) == []


def test_ex3_cel_optional_old_self_needs_old_self_in_the_rule() -> None:
    assert _texts(_spec([{"rule": "self.replicas > 0", "optionalOldSelf": True}])) == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].optionalOldSelf: "
        "Invalid value: true: may not be set if oldSelf is not used in rule"]
    assert _texts(_spec([{"rule": "!oldSelf.hasValue() || oldSelf.value() == self",
                          "optionalOldSelf": True}])) == []


def test_ex3_cel_optional_old_self_compile_error_points_into_the_rule() -> None:
    texts = _texts(_spec([{"rule": "oldSelf.value() + 1", "optionalOldSelf": True}]))
    assert len(texts) == 1
    assert "compilation failed: ERROR: <input>:1:" in texts[0]
    assert texts[0].endswith(" | oldSelf.value() + 1\n | ................^")


def test_ex3_cel_undefined_field_is_a_compile_error() -> None:
    schema = _spec([{"rule": "self.replicaz > 0"},
                    {"rule": "self.items.all(i, i.nam != '')"},
                    {"rule": "has(self.replicas) && self.labels['a'].size() > 0"}],
                   replicas={"type": "integer"},
                   items={"type": "array", "items": {"type": "object", "properties": {
                       "name": {"type": "string"}}}},
                   labels={"type": "object", "additionalProperties": {"type": "string"}})
    texts = _texts(schema)
    assert len(texts) == 2
    assert texts[0].startswith(
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.replicaz > 0"')
    assert texts[0].endswith("}: compilation failed: ERROR: <input>:1:5: undefined field "
                             "'replicaz'\n | self.replicaz > 0\n | ....^")
    assert texts[1].endswith("}: compilation failed: ERROR: <input>:1:20: undefined field "
                             "'nam'\n | self.items.all(i, i.nam != '')\n | ...................^")


def test_ex3_cel_root_rule_sees_metadata_name_only() -> None:
    schema = {"type": "object", "properties": {"metadata": {"type": "object"}},
              "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 20"},
                                           {"rule": "has(self.metadata.labels)"}]}
    texts = _texts(schema)
    assert len(texts) == 1
    assert texts[0].startswith(f"{BASE}.x-kubernetes-validations[1].rule: ")
    assert texts[0].endswith("undefined field 'labels'\n | has(self.metadata.labels)\n"
                             " | ...^")


def test_ex3_cel_preserve_unknown_fields_and_escaped_names_compile() -> None:
    schema = _spec([{"rule": "self.x__dash__y == 'a' && self.__namespace__ == 'b'"},
                    {"rule": "self.blob.anything == 1"}],
                   **{"x-y": {"type": "string"}, "namespace": {"type": "string"},
                      "blob": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                               "properties": {"known": {"type": "string"}}}})
    assert _texts(schema) == []


def test_ex3_cel_rule_on_an_untyped_node_is_refused() -> None:
    schema = {"type": "object", "properties": {"blob": {
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": [{"rule": "has(self.a)"}]}}}
    assert _texts(schema) == [
        f"{BASE}.properties[blob].x-kubernetes-validations: Internal error: rule declared on "
        "schema that does not support validation rules type: '' "
        "x-kubernetes-preserve-unknown-fields: 'true'"]
