"""SPEC EX1/EX3 on real CRDs: kopf's example CRD, and CRDs shaped like cert-manager's
Certificate and prometheus-operator's ServiceMonitor, are valid; the objects from their docs
validate, prune to themselves and default as expected; broken objects get kube's messages."""

from __future__ import annotations

import copy

import pytest

from skiff.api.apiextensions.crd import (
    default_crd,
    printer_columns_of,
    schema_of,
    storage_version,
    validate_crd,
)
from skiff.api.apiextensions.structural import (
    default_custom_object,
    prune_custom_object,
    validate_custom_object,
)
from skiff.api.validation import validate

from .builders import load_fixture, messages

FIXTURES = ["kopfexample", "certificate", "servicemonitor"]


@pytest.mark.parametrize("name", FIXTURES)
def test_ex1_real_crd_is_valid(name: str) -> None:
    crd, _ = load_fixture(name)
    default_crd(crd)
    assert messages(validate_crd(crd, None)) == []
    assert validate(crd) == []


@pytest.mark.parametrize("name", FIXTURES)
def test_ex3_documented_object_validates_and_prunes_to_itself(name: str) -> None:
    crd, obj = load_fixture(name)
    default_crd(crd)
    schema = schema_of(crd, storage_version(crd))
    assert schema is not None
    before = copy.deepcopy(obj)
    assert prune_custom_object(schema, obj) == []
    assert obj == before
    default_custom_object(schema, obj)
    assert messages(validate_custom_object(schema, obj)) == []


def test_ex1_kopf_example_keeps_its_printer_columns_and_preserves_spec() -> None:
    crd, obj = load_fixture("kopfexample")
    default_crd(crd)
    assert crd["spec"]["names"]["listKind"] == "KopfExampleList"
    assert [c["jsonPath"] for c in printer_columns_of(crd, "v1")] == [
        ".spec.duration", ".status.create_fn.children", ".status.create_fn.message"]
    schema = schema_of(crd, "v1")
    assert schema is not None
    obj["spec"]["nested"] = {"anything": ["goes"]}
    assert prune_custom_object(schema, obj) == []


def test_ex3_certificate_without_secret_name_is_invalid() -> None:
    crd, obj = load_fixture("certificate")
    schema = schema_of(crd, "v1")
    assert schema is not None
    del obj["spec"]["secretName"]
    obj["spec"]["privateKey"]["algorithm"] = "DSA"
    obj["spec"]["renewBeforePercentage"] = 1.5
    obj["spec"]["revisionHistoryLimit"] = "3"
    # kube reports fields in Go map order; the set of messages is what is fixed
    assert sorted(messages(validate_custom_object(schema, obj))) == sorted([
        'spec.privateKey.algorithm: Unsupported value: "DSA": supported values: "RSA", '
        '"ECDSA", "Ed25519"',
        'spec.renewBeforePercentage: Invalid value: "number": spec.renewBeforePercentage in '
        'body must be of type integer,string: "number"',
        '<nil>: Invalid value: "": "spec.renewBeforePercentage" must validate at least one '
        "schema (anyOf)",
        'spec.renewBeforePercentage: Invalid value: "number": spec.renewBeforePercentage in '
        'body must be of type integer: "number"',
        'spec.revisionHistoryLimit: Invalid value: "string": spec.revisionHistoryLimit in body '
        'must be of type integer: "string"',
        "spec.secretName: Required value",
    ])


def test_ex3_certificate_status_conditions_are_a_map_keyed_by_type() -> None:
    crd, obj = load_fixture("certificate")
    schema = schema_of(crd, "v1")
    assert schema is not None
    obj["status"] = {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "Ready", "status": "Maybe"}]}
    assert messages(validate_custom_object(schema, obj)) == [
        'status.conditions[1].status: Unsupported value: "Maybe": supported values: "True", '
        '"False", "Unknown"',
        'status.conditions[1]: Duplicate value: {"type": "Ready"}',
    ]


def test_ex3_service_monitor_endpoints_are_checked_and_relabelings_defaulted() -> None:
    crd, obj = load_fixture("servicemonitor")
    schema = schema_of(crd, "v1")
    assert schema is not None
    obj["spec"]["endpoints"] = [
        {"port": "web", "interval": "30s", "targetPort": 8080,
         "relabelings": [{"sourceLabels": ["__meta_pod_name"], "targetLabel": "pod"}]},
        {"interval": "often", "scheme": "ftp", "targetPort": "metrics"},
    ]
    obj["spec"]["extra"] = {"kept": {"as": "written"}}
    obj["spec"]["bogus"] = 1
    assert prune_custom_object(schema, obj) == ["spec.bogus"]
    default_custom_object(schema, obj)
    assert obj["spec"]["endpoints"][0]["relabelings"][0]["action"] == "replace"
    assert obj["spec"]["extra"] == {"kept": {"as": "written"}}
    pattern = ("^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
               "(([0-9]+)ms)?)$")
    assert messages(validate_custom_object(schema, obj)) == [
        'spec.endpoints[1].interval: Invalid value: "often": spec.endpoints[1].interval in '
        f"body should match '{pattern}'",
        'spec.endpoints[1].scheme: Unsupported value: "ftp": supported values: "http", '
        '"https"',
    ]
    del obj["spec"]["selector"]
    assert "spec.selector: Required value" in messages(validate_custom_object(schema, obj))
