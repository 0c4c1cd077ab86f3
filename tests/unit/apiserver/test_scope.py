"""SPEC AU5: the scope a request reaches, as both the guard and the registry compute it
(skiff.apiserver.registry.scope) — a table of request namespaces and what they address."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError, Reason, lookup
from skiff.apiserver.registry.scope import (
    authorized_namespace,
    past_revision,
    request_namespace,
    selected_name,
)


@pytest.mark.parametrize(("resource", "namespace", "collection", "scope"), [
    pytest.param("secrets", None, True, None, id="list-without-namespace-is-cluster-wide"),
    pytest.param("secrets", "", True, None, id="list-with-empty-namespace-is-cluster-wide"),
    pytest.param("secrets", "team-a", True, "team-a", id="list-in-a-namespace"),
    pytest.param("secrets", None, False, "default", id="get-without-namespace-is-default"),
    pytest.param("secrets", "", False, "default", id="get-with-empty-namespace-is-default"),
    pytest.param("secrets", "team-a", False, "team-a", id="get-in-a-namespace"),
    pytest.param("nodes", "team-a", False, None, id="cluster-scoped-kind-has-none"),
    pytest.param("nodes", None, True, None, id="cluster-scoped-list"),
])
def test_au5_request_namespace_is_the_scope_read(resource: str, namespace: str | None,
                                                 collection: bool, scope: str | None) -> None:
    assert request_namespace(lookup(resource), namespace, collection=collection) == scope


@pytest.mark.parametrize("namespace", [
    pytest.param(0, id="zero"), pytest.param(False, id="false"),
    pytest.param(["default"], id="list"), pytest.param({"a": 1}, id="map"),
    pytest.param(b"default", id="bytes"),
])
@pytest.mark.parametrize("collection", [True, False])
def test_au5_namespace_that_is_not_a_string_is_400_naming_it(namespace: Any,
                                                             collection: bool) -> None:
    with pytest.raises(ApiError) as err:
        request_namespace(lookup("secrets"), namespace, collection=collection)
    assert err.value.reason == Reason.BAD_REQUEST
    assert err.value.message.startswith("namespace: Invalid value: ")
    assert err.value.message.endswith("must be a string")


@pytest.mark.parametrize("namespace", ["a/b", "..", ".", "a%2Fb"])
def test_au5_namespace_that_is_not_a_path_segment_is_400(namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        request_namespace(lookup("secrets"), namespace, collection=True)
    assert err.value.reason == Reason.BAD_REQUEST
    assert err.value.message.startswith(f'namespace: Invalid value: "{namespace}"')


def test_au5_cluster_wide_scope_is_authorized_without_namespace() -> None:
    assert authorized_namespace(None) == ""
    assert authorized_namespace("team-a") == "team-a"


@pytest.mark.parametrize(("selector", "name"), [
    pytest.param("metadata.name=db", "db", id="equals"),
    pytest.param("metadata.name==db", "db", id="double-equals"),
    pytest.param("metadata.name=db,type=Opaque", "db", id="with-another-term"),
    pytest.param("metadata.name!=db", "", id="not-equal-selects-many"),
    pytest.param("metadata.namespace=db", "", id="another-field"),
    pytest.param("", "", id="none"),
    pytest.param("metadata.name=a/b", "", id="not-a-path-segment"),
    pytest.param("metadata.name", "", id="malformed"),
])
def test_au5_list_narrowed_to_one_name_is_authorized_for_it(selector: str,
                                                            name: str) -> None:
    assert selected_name(selector) == name


@pytest.mark.parametrize(("revision", "past"), [
    (None, False), (0, False), ("", False), ("0", False), (12, True), ("12", True),
    ("abc", True),
])
def test_history_needs_list_authorization_past_revision(revision: Any, past: bool) -> None:
    assert past_revision(revision) is past
