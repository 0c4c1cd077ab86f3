"""SPEC EX1: a CustomResourceDefinition is validated as kube-apiserver validates it, with its
messages and field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skiff.api.apiextensions.crd import (
    default_crd,
    printer_columns_of,
    schema_of,
    selectable_fields_of,
    served_versions,
    storage_version,
    subresources_of,
    validate_crd,
    version_entry,
)
from skiff.api.validation import validate

from .builders import SIMPLE_SCHEMA, make_crd, make_version, messages

DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
           "start with an alphabetic character, and end with an alphanumeric character "
           "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
           "'[a-z]([-a-z0-9]*[a-z0-9])?')")


def errors_of(crd: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return messages(validate_crd(crd, old))


def test_ex1_valid_crd_has_no_errors() -> None:
    crd = make_crd()
    default_crd(crd)
    assert errors_of(crd) == []
    assert validate(crd) == []


def test_ex1_crd_with_two_storage_versions_is_invalid() -> None:
    crd = make_crd(versions=[make_version("v1"), make_version("v2")])
    found = errors_of(crd)
    assert len(found) == 1
    assert found[0].startswith("spec.versions: Invalid value: ")
    assert found[0].endswith(": must have exactly one version marked as storage version")


def test_ex1_crd_without_versions_has_no_storage_version() -> None:
    found = errors_of(make_crd(versions=[]))
    assert found == ["spec.versions: Invalid value: []: must have exactly one version marked "
                     "as storage version"]


def test_ex1_crd_version_names_are_unique_dns1035_labels() -> None:
    crd = make_crd(versions=[make_version("v1"), make_version("v1", storage=False),
                             make_version("V_2", storage=False)])
    found = errors_of(crd)
    assert f'spec.versions[2].name: Invalid value: "V_2": {DNS1035}' in found
    assert any(e.endswith(": must contain unique version names") for e in found)


def test_ex1_crd_name_must_be_plural_dot_group() -> None:
    crd = make_crd()
    crd["metadata"]["name"] = "widget.example.com"
    assert errors_of(crd) == ['metadata.name: Invalid value: "widget.example.com": must be '
                              'spec.names.plural+"."+spec.group']


@pytest.mark.parametrize(("group", "expected"), [
    pytest.param("", "spec.group: Required value", id="missing"),
    pytest.param("example", 'spec.group: Invalid value: "example": should be a domain with at '
                            "least one dot", id="no-dot"),
    pytest.param("Example.com", 'spec.group: Invalid value: "Example.com": a lowercase RFC 1123 '
                                "subdomain must consist of lower case alphanumeric characters, "
                                "'-' or '.', and must start and end with an alphanumeric "
                                "character (e.g. 'example.com', regex used for validation is "
                                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                                "[a-z0-9])?)*')", id="upper-case"),
])
def test_ex1_crd_group_is_a_dns_subdomain_with_a_dot(group: str, expected: str) -> None:
    crd = make_crd(group=group)
    crd["metadata"]["name"] = f"widgets.{group}"
    assert expected in errors_of(crd)


def test_ex1_crd_scope_is_namespaced_or_cluster() -> None:
    assert errors_of(make_crd(scope="Global")) == [
        'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"']
    assert errors_of(make_crd(scope="")) == ["spec.scope: Required value"]


def test_ex1_crd_names_are_required_and_well_formed() -> None:
    crd = make_crd(plural="Widgets", kind="Wid_get", shortNames=["w1", "W"],
                   categories=["all", "9x"])
    crd["spec"]["names"]["singular"] = ""
    crd["spec"]["names"]["listKind"] = "Wid_get"
    found = errors_of(crd)
    assert "spec.names.singular: Required value" in found
    assert f'spec.names.plural: Invalid value: "Widgets": {DNS1035}' in found
    assert ('spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should '
            f"otherwise match: {DNS1035}") in found
    assert 'spec.names.listKind: Invalid value: "Wid_get": kind and listKind may not be the same' \
        in found
    assert f'spec.names.shortNames[1]: Invalid value: "W": {DNS1035}' in found
    assert f'spec.names.categories[1]: Invalid value: "9x": {DNS1035}' in found


def test_ex1_crd_version_needs_an_openapi_v3_schema() -> None:
    version = make_version()
    del version["schema"]
    assert errors_of(make_crd(versions=[version])) == [
        "spec.versions[0].schema.openAPIV3Schema: Required value"]


def test_ex1_crd_scale_subresource_paths_are_under_spec_and_status() -> None:
    version = make_version(subresources={"status": {}, "scale": {
        "specReplicasPath": ".status.replicas", "statusReplicasPath": "status.replicas",
        "labelSelectorPath": ".metadata.labels"}})
    assert errors_of(make_crd(versions=[version])) == [
        'spec.versions[0].subresources.scale.specReplicasPath: Invalid value: '
        '".status.replicas": should be a json path under .spec',
        'spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: '
        '"status.replicas": must be a simple json path starting with .',
        'spec.versions[0].subresources.scale.labelSelectorPath: Invalid value: '
        '".metadata.labels": should be a json path under either .spec or .status',
    ]
    version["subresources"]["scale"] = {"statusReplicasPath": ".status.replicas"}
    assert errors_of(make_crd(versions=[version])) == [
        "spec.versions[0].subresources.scale.specReplicasPath: Required value"]


def test_ex1_crd_status_subresource_restricts_the_schema_root() -> None:
    schema = copy.deepcopy(SIMPLE_SCHEMA)
    schema["anyOf"] = [{"required": ["spec"]}]
    found = errors_of(make_crd(versions=[make_version(schema=schema,
                                                      subresources={"status": {}})]))
    assert len(found) == 1
    assert found[0].startswith("spec.versions[0].schema.openAPIV3Schema: Invalid value: ")
    assert found[0].endswith("fields are allowed at the root of the schema if the status "
                             "subresource is enabled")


def test_ex1_crd_printer_columns_have_name_type_and_json_path() -> None:
    version = make_version(additionalPrinterColumns=[
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "", "type": "list", "jsonPath": "spec.x", "format": "money"},
        {"name": "Age", "type": "date"},
    ])
    assert errors_of(make_crd(versions=[version])) == [
        "spec.versions[0].additionalPrinterColumns[1].name: Required value",
        'spec.versions[0].additionalPrinterColumns[1].type: Invalid value: "list": must be '
        "one of boolean,date,integer,number,string",
        'spec.versions[0].additionalPrinterColumns[1].format: Invalid value: "money": must be '
        "one of byte,date,date-time,double,float,int32,int64,password",
        'spec.versions[0].additionalPrinterColumns[1].JSONPath: Invalid value: "spec.x": '
        "must be a simple json path starting with .",
        "spec.versions[0].additionalPrinterColumns[2].JSONPath: Required value",
    ]


def test_ex1_crd_selectable_fields_point_at_scalar_fields() -> None:
    version = make_version(selectableFields=[
        {"jsonPath": ".spec.image"}, {"jsonPath": ".spec.image"}, {"jsonPath": ".spec"},
        {"jsonPath": ".spec.nothing"}, {"jsonPath": ""}])
    assert errors_of(make_crd(versions=[version])) == [
        'spec.versions[0].selectableFields[1].jsonPath: Duplicate value: ".spec.image"',
        'spec.versions[0].selectableFields[2].jsonPath: Invalid value: ".spec": must point to '
        "a field of type string, boolean or integer. Enum string fields and strings with "
        "formats are allowed.",
        'spec.versions[0].selectableFields[3].jsonPath: Invalid value: ".spec.nothing": is an '
        "invalid path: does not refer to a valid field: .spec.nothing",
        "spec.versions[0].selectableFields[4].jsonPath: Required value",
    ]


def test_ex1_crd_conversion_strategy_is_none_or_webhook() -> None:
    crd = make_crd()
    crd["spec"]["conversion"] = {"strategy": "Magic"}
    assert errors_of(crd) == ['spec.conversion.strategy: Unsupported value: "Magic": supported '
                              'values: "None", "Webhook"']


def test_ex1_crd_webhook_conversion_needs_client_config_and_review_versions() -> None:
    crd = make_crd(versions=[make_version("v1"), make_version("v2", storage=False)])
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {}}
    assert errors_of(crd) == [
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set "
        "to Webhook",
        "spec.conversion.conversionReviewVersions: Required value",
    ]
    crd["spec"]["conversion"]["webhook"] = {
        "conversionReviewVersions": ["v2"],
        "clientConfig": {"url": "http://hook.example.com/convert"}}
    assert errors_of(crd) == [
        'spec.conversion.webhookClientConfig.url: Invalid value: "http": \'https\' is the only '
        "allowed URL scheme; desired format: https://host[/path]",
        'spec.conversion.conversionReviewVersions: Invalid value: ["v2"]: must include at '
        "least one of v1, v1beta1",
    ]
    crd["spec"]["conversion"]["webhook"] = {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "hook", "namespace": "system", "port": 443}}}
    assert errors_of(crd) == []


def test_ex1_crd_none_conversion_forbids_webhook_settings() -> None:
    crd = make_crd()
    crd["spec"]["conversion"] = {"strategy": "None", "webhook": {
        "clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}}
    assert errors_of(crd) == [
        "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is "
        "not set to Webhook",
        "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy "
        "is not set to Webhook",
    ]


def _established(crd: dict[str, Any]) -> dict[str, Any]:
    crd = copy.deepcopy(crd)
    default_crd(crd)
    crd["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    return crd


def test_ex1_crd_scope_group_and_plural_are_immutable() -> None:
    old = _established(make_crd())
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["spec"]["names"]["kind"] = "Gadget"
    assert errors_of(new, old) == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        'spec.names.kind: Invalid value: "Gadget": field is immutable',
    ]
    new = make_crd(group="example.org", plural="gadgets")
    assert errors_of(new, old) == [
        'spec.group: Invalid value: "example.org": field is immutable',
        'spec.names.plural: Invalid value: "gadgets": field is immutable',
    ]


def test_ex1_crd_stored_version_may_not_be_removed() -> None:
    old = _established(make_crd(versions=[make_version("v1"), make_version("v2", storage=False)]))
    new = copy.deepcopy(old)
    new["spec"]["versions"] = [make_version("v2")]
    assert errors_of(new, old) == [
        'status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was '
        "previously a storage version, and must remain in spec.versions until a storage "
        "migration ensures no data remains persisted in v1 and removes v1 from "
        "status.storedVersions"]
    # moving storage to v2 while keeping v1 is fine: both are then stored versions
    new["spec"]["versions"] = [make_version("v1", storage=False), make_version("v2")]
    assert errors_of(new, old) == []


def test_ex1_crd_defaults_are_the_v1_ones() -> None:
    crd = make_crd()
    del crd["spec"]["names"]["singular"], crd["spec"]["names"]["listKind"]
    del crd["spec"]["conversion"]
    default_crd(crd)
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["status"]["storedVersions"] == ["v1"]
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1}}}}}
    crd = make_crd(schema=schema)
    default_crd(crd)
    assert schema_of(crd, "v1") == schema  # schema defaults are for custom objects only


def test_ex1_crd_version_accessors() -> None:
    crd = make_crd(versions=[
        make_version("v1", storage=False, subresources={"status": {}},
                     additionalPrinterColumns=[{"name": "I", "type": "string",
                                                "jsonPath": ".spec.image"}],
                     selectableFields=[{"jsonPath": ".spec.image"}]),
        make_version("v2"), make_version("v3", served=False, storage=False)])
    assert storage_version(crd) == "v2"
    assert served_versions(crd) == ["v1", "v2"]
    assert (version_entry(crd, "v3") or {}).get("served") is False
    assert version_entry(crd, "v9") is None
    assert schema_of(crd, "v1") == SIMPLE_SCHEMA
    assert subresources_of(crd, "v1") == {"status": {}}
    assert subresources_of(crd, "v2") == {}
    assert [c["name"] for c in printer_columns_of(crd, "v1")] == ["I"]
    assert selectable_fields_of(crd, "v1") == [".spec.image"]
    assert selectable_fields_of(crd, "v2") == []


def test_ex1_crd_rules_that_do_not_compile_are_refused() -> None:
    schema = copy.deepcopy(SIMPLE_SCHEMA)
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.replicas >"}]
    found = errors_of(make_crd(schema=schema))
    assert len(found) == 1
    assert found[0].startswith("spec.versions[0].schema.openAPIV3Schema.properties[spec]."
                               "x-kubernetes-validations[0].rule: Invalid value: ")
    assert "compilation failed: ERROR: <input>:1:" in found[0]


def test_ex1_crd_in_a_community_group_names_its_api_approval() -> None:
    crd = make_crd(group="gateway.networking.k8s.io", plural="gateways", kind="Gateway")
    assert errors_of(crd) == [
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups "
        'must have approval annotation "api-approved.kubernetes.io", see '
        "https://github.com/kubernetes/enhancements/pull/1111"]
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "yes"}
    assert len(errors_of(crd)) == 1
    crd["metadata"]["annotations"] = {
        "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/1"}
    assert errors_of(crd) == []
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, experimental"}
    assert errors_of(crd) == []


def test_ex1_crd_may_not_turn_preserve_unknown_fields_on() -> None:
    crd = make_crd()
    crd["spec"]["preserveUnknownFields"] = True
    assert errors_of(crd) == [
        "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
        "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"]


def test_ex1_crd_generate_name_cannot_make_the_required_name() -> None:
    crd = make_crd()
    crd["metadata"] = {"generateName": "widgets-"}
    assert errors_of(crd) == ['metadata.generateName: Invalid value: "widgets-": must be '
                              'spec.names.plural+"."+spec.group']
