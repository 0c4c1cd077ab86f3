"""SPEC EX8: APIServices are defaulted and validated as kube-aggregator does it, with its
messages and field paths (`pkg/apis/apiregistration/validation`)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.groups.apiregistration import available_column, service_column
from skiff.api.types import Obj

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n").decode()


def api_service(name: str = "v1beta1.metrics.example.com", **spec: Any) -> Obj:
    base: Obj = {"group": "metrics.example.com", "version": "v1beta1",
                 "groupPriorityMinimum": 100, "versionPriority": 100,
                 "service": {"namespace": "ex8", "name": "metrics"}}
    base.update(spec)
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name}, "spec": {k: v for k, v in base.items()
                                                 if v is not None}}


def errors_of(obj: Obj) -> list[str]:
    apply_defaults(obj)
    return [str(e) for e in validate(obj)]


def test_ex8_a_service_reference_defaults_to_port_443() -> None:
    obj = api_service()
    apply_defaults(obj)
    assert obj["spec"]["service"] == {"namespace": "ex8", "name": "metrics", "port": 443}
    assert errors_of(obj) == []


def test_ex8_local_apiservices_are_valid_including_the_core_group() -> None:
    core = api_service("v1.", group=None, version="v1", service=None,
                       groupPriorityMinimum=18000, versionPriority=1)
    assert errors_of(core) == []
    assert errors_of(api_service("v1.apps", group="apps", version="v1", service=None)) == []


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(api_service("v1.metrics.example.com"),
                 ['metadata.name: Invalid value: "v1.metrics.example.com": must be '
                  '`spec.version+"."+spec.group`: "v1beta1.metrics.example.com"'],
                 id="name-is-version-dot-group"),
    pytest.param(api_service("v1beta1.a/b", group="a/b"),
                 ["metadata.name: Invalid value: \"v1beta1.a/b\": may not contain '/'",
                  'spec.group: Invalid value: "a/b": a lowercase RFC 1123 subdomain must '
                  "consist of lower case alphanumeric characters, '-' or '.', and must start "
                  "and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                  "[a-z0-9])?)*')"],
                 id="path-segment-name"),
    pytest.param(api_service("v2.", group=None, version="v2", service=None),
                 ["spec.group: Required value: only v1 may have an empty group and it "
                  "better be legacy kube"], id="empty-group-only-for-v1"),
    pytest.param(api_service("V1.metrics.example.com", version="V1"),
                 ['spec.version: Invalid value: "V1": a DNS-1035 label must consist of lower '
                  "case alphanumeric characters or '-', start with an alphabetic character, "
                  "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                  "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"],
                 id="version-dns1035"),
    pytest.param(api_service(groupPriorityMinimum=None, versionPriority=None),
                 ["spec.groupPriorityMinimum: Invalid value: 0: must be positive and less "
                  "than 20000",
                  "spec.versionPriority: Invalid value: 0: must be positive and less than "
                  "1000"], id="priorities-required"),
    pytest.param(api_service(groupPriorityMinimum=20001, versionPriority=1001),
                 ["spec.groupPriorityMinimum: Invalid value: 20001: must be positive and "
                  "less than 20000",
                  "spec.versionPriority: Invalid value: 1001: must be positive and less than "
                  "1000"], id="priorities-bounded"),
    pytest.param(api_service(service={"port": 443}),
                 ["spec.service.namespace: Required value",
                  "spec.service.name: Required value"], id="service-names-required"),
    pytest.param(api_service(caBundle=CA, insecureSkipTLSVerify=True),
                 ["spec.insecureSkipTLSVerify: Invalid value: true: may not be true if "
                  "caBundle is present"], id="ca-bundle-or-insecure"),
    pytest.param(api_service("v1.apps", group="apps", version="v1", service=None,
                             caBundle=CA, insecureSkipTLSVerify=True),
                 ['spec.caBundle: Invalid value: "33 bytes": local APIServices may not have '
                  "a caBundle",
                  "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may "
                  "not have insecureSkipTLSVerify"], id="local-has-no-tls"),
])
def test_ex8_invalid_apiservices_get_kubes_messages(obj: Obj, expected: list[str]) -> None:
    assert errors_of(obj) == expected


def test_ex8_a_condition_status_must_be_true_false_or_unknown() -> None:
    obj = api_service()
    obj["status"] = {"conditions": [{"type": "Available", "status": "Maybe"}]}
    assert errors_of(obj) == ['status.conditions[0].status: Unsupported value: "Maybe": '
                              'supported values: "True", "False", "Unknown"']


def test_ex8_kubectl_columns_show_the_service_and_the_reason_when_unavailable() -> None:
    obj = api_service()
    assert (service_column(obj), available_column(obj)) == ("ex8/metrics", "Unknown")
    obj["status"] = {"conditions": [{"type": "Available", "status": "False",
                                     "reason": "FailedDiscoveryCheck"}]}
    assert available_column(obj) == "False (FailedDiscoveryCheck)"
    local = api_service("v1.apps", group="apps", version="v1", service=None)
    local["status"] = {"conditions": [{"type": "Available", "status": "True",
                                       "reason": "Local"}]}
    assert (service_column(local), available_column(local)) == ("Local", "True")
