"""SPEC EX3: a CRD version's openAPIV3Schema must be a structural schema in the OpenAPI
subset CRDs accept; kube-apiserver's messages and paths."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.apiextensions.crd import validate_crd

from .builders import make_crd, messages

ROOT = "spec.versions[0].schema.openAPIV3Schema"


def schema_errors(schema: dict[str, Any]) -> list[str]:
    return messages(validate_crd(make_crd(schema=schema), None))


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(("schema", "expected"), [
    pytest.param({"properties": {"spec": {"type": "object"}}},
                 [f"{ROOT}.type: Required value: must not be empty at the root"],
                 id="root-type-missing"),
    pytest.param({"type": "array", "items": {"type": "string"}},
                 [f'{ROOT}.type: Invalid value: "array": must be object at the root'],
                 id="root-not-object"),
    pytest.param(obj(spec={"properties": {"x": {"type": "string"}}}),
                 [f"{ROOT}.properties[spec].type: Required value: must not be empty for "
                  "specified object fields"], id="field-type-missing"),
    pytest.param(obj(spec={"type": "array", "items": {}}),
                 [f"{ROOT}.properties[spec].items.type: Required value: must not be empty for "
                  "specified array items"], id="item-type-missing"),
    pytest.param(obj(spec={"type": "array"}),
                 [f"{ROOT}.properties[spec].items: Required value: must be specified"],
                 id="array-without-items"),
    pytest.param({"type": "object", "additionalProperties": {"type": "string"}},
                 [f"{ROOT}.additionalProperties: Forbidden: must not be used at the root"],
                 id="additional-properties-at-root"),
    pytest.param(obj(spec={"type": "object", "properties": {"a": {"type": "string"}},
                           "additionalProperties": {"type": "string"}}),
                 [f"{ROOT}.properties[spec].additionalProperties: Forbidden: "
                  "additionalProperties and properties are mutual exclusive"],
                 id="properties-and-additional-properties"),
    pytest.param({**obj(spec={"type": "object"}),
                  "anyOf": [{"type": "object", "properties": {"x": {"minLength": 1}}}]},
                 [f"{ROOT}.anyOf[0].type: Forbidden: must be empty to be structural",
                  f"{ROOT}.properties[x]: Required value: because it is defined in "
                  f"{ROOT}.anyOf[0].properties[x]"],
                 id="type-in-anyof-and-incomplete"),
    pytest.param(obj(port={"x-kubernetes-int-or-string": True,
                           "anyOf": [{"type": "integer"}, {"type": "string"}]}),
                 [], id="int-or-string-pattern"),
    pytest.param(obj(free={"x-kubernetes-preserve-unknown-fields": True}),
                 [], id="preserve-unknown-fields-without-type"),
    pytest.param(obj(metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
                 [f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other "
                  "than name and generateName, but metadata is implicitly specified"],
                 id="root-metadata-beyond-name"),
    pytest.param(obj(metadata={"type": "object", "properties": {
                     "name": {"type": "string", "maxLength": 20}}}),
                 [], id="root-metadata-name-only"),
    pytest.param(obj(kind={"type": "integer"}),
                 [f'{ROOT}.properties[kind].type: Invalid value: "integer": must be string'],
                 id="kind-not-string"),
    pytest.param(obj(tpl={"type": "string", "x-kubernetes-embedded-resource": True,
                          "x-kubernetes-preserve-unknown-fields": True}),
                 [f'{ROOT}.properties[tpl].type: Invalid value: "string": must be object if '
                  "x-kubernetes-embedded-resource is true"], id="embedded-not-object"),
    pytest.param(obj(tpl={"type": "object", "x-kubernetes-embedded-resource": True}),
                 [f"{ROOT}.properties[tpl].properties: Required value: must not be empty if "
                  "x-kubernetes-embedded-resource is true without "
                  "x-kubernetes-preserve-unknown-fields"], id="embedded-without-properties"),
    pytest.param(obj(n={"type": "integer", "x-kubernetes-int-or-string": True,
                        "x-kubernetes-preserve-unknown-fields": True}),
                 [f"{ROOT}.properties[n].x-kubernetes-preserve-unknown-fields: Invalid value: "
                  "true: must be false if x-kubernetes-int-or-string is true"],
                 id="int-or-string-and-preserve"),
    pytest.param(obj(x={"type": "string", "pattern": "(unclosed"}),
                 [f'{ROOT}.properties[x].pattern: Invalid value: "(unclosed": must be a valid '
                  "regular expression, but isn't: error parsing regexp: missing closing ): "
                  "`(unclosed`"], id="bad-pattern"),
    pytest.param(obj(x={"type": "string", "pattern": "^(?i)(abort|warn)?$"}), [],
                 id="go-flag-group-mid-pattern"),
])
def test_ex3_structural_schema_rules(schema: dict[str, Any], expected: list[str]) -> None:
    assert schema_errors(schema) == expected


@pytest.mark.parametrize(("schema", "expected"), [
    pytest.param(obj(x={"$ref": "#/definitions/y", "type": "string"}),
                 [f"{ROOT}.properties[x].$ref: Forbidden: $ref is not supported"], id="ref"),
    pytest.param(obj(x={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
                 [f"{ROOT}.properties[x].uniqueItems: Forbidden: uniqueItems cannot be set to "
                  "true since the runtime complexity becomes quadratic"], id="unique-items"),
    pytest.param(obj(x={"type": "null"}),
                 [f"{ROOT}.properties[x].type: Forbidden: type cannot be set to null, use "
                  "nullable as an alternative"], id="null-type"),
    pytest.param(obj(x={"type": "map"}),
                 [f'{ROOT}.properties[x].type: Unsupported value: "map": supported values: '
                  '"array", "boolean", "integer", "number", "object", "string"'],
                 id="unknown-type"),
    pytest.param(obj(metadata={"type": "object", "default": {}}),
                 [f"{ROOT}.properties[metadata].default: Forbidden: must not be set in "
                  "top-level metadata"], id="default-in-metadata"),
    pytest.param(obj(x={"type": "string", "x-kubernetes-list-type": "set"}),
                 [f'{ROOT}.properties[x].type: Invalid value: "string": must be array if '
                  "x-kubernetes-list-type is specified"], id="list-type-on-string"),
    pytest.param(obj(x={"type": "array", "items": {"type": "object", "properties": {
                     "name": {"type": "string"}}}, "x-kubernetes-list-type": "map"}),
                 [f"{ROOT}.properties[x].x-kubernetes-list-map-keys: Required value: must not "
                  "be empty if x-kubernetes-list-type is map"], id="list-map-without-keys"),
    pytest.param(obj(x={"type": "array", "items": {"type": "object", "properties": {
                     "name": {"type": "string"}}}, "x-kubernetes-list-type": "map",
                     "x-kubernetes-list-map-keys": ["name"]}),
                 [f"{ROOT}.properties[x].items.properties[name].default: Required value: this "
                  "property is in x-kubernetes-list-map-keys, so it must have a default or be "
                  "a required property"], id="list-map-key-optional"),
    pytest.param(obj(x={"type": "array", "items": {"type": "object", "required": ["id"],
                                                   "properties": {"name": {"type": "string"}}},
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]}),
                 [f'{ROOT}.properties[x].x-kubernetes-list-map-keys: Invalid value: ["id"]: '
                  "entries must all be names of item properties"], id="list-map-key-unknown"),
    pytest.param(obj(x={"type": "object", "x-kubernetes-map-type": "granular"}),
                 [], id="map-type-granular"),
    pytest.param(obj(x={"type": "integer", "default": "three"}),
                 [f'{ROOT}.properties[x].default: Invalid value: "string":  in body must be of '
                  'type integer: "string"'], id="default-of-wrong-type"),
    pytest.param(obj(x={"type": "object", "properties": {"a": {"type": "string"}},
                        "default": {"a": "1", "b": "2"}}),
                 [f'{ROOT}.properties[x].default: Invalid value: {{"a":"1","b":"2"}}: must not '
                  "have unknown fields"], id="default-not-pruned"),
    pytest.param(obj(x={"type": "array", "items": {"type": "object", "properties": {
                     "a": {"type": "string"}}}, "default": [{"a": "1", "b": "2"}]}),
                 [f'{ROOT}.properties[x].default: Invalid value: [{{"a":"1","b":"2"}}]: must '
                  "not have unknown fields"], id="array-default-not-pruned"),
])
def test_ex3_openapi_subset_rules(schema: dict[str, Any], expected: list[str]) -> None:
    found = [e.replace('{"a": "1", "b": "2"}', '{"a":"1","b":"2"}') for e in schema_errors(schema)]
    assert found == expected


def test_ex3_nullable_is_forbidden_at_the_root() -> None:
    schema = obj(spec={"type": "object"})
    schema["nullable"] = True
    assert schema_errors(schema) == [f"{ROOT}.nullable: Forbidden: nullable cannot be true at "
                                     "the root"]
