"""Label and field selectors follow Kubernetes' syntax and semantics (AS7)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError, FieldSelector, LabelSelector, Reason
from skiff.api.selectors import (
    validate_label_key,
    validate_label_selector,
    validate_label_value,
    validate_labels,
)
from skiff.api.testing import make_pod

LABELS = {"app": "web", "tier": "front", "version": "3"}


@pytest.mark.parametrize(("text", "matches"), [
    pytest.param("", True, id="empty-matches-everything"),
    pytest.param("app=web", True, id="equals"),
    pytest.param("app==web", True, id="double-equals"),
    pytest.param("app!=web", False, id="not-equals"),
    pytest.param("app!=db", True, id="not-equals-other"),
    pytest.param("missing!=x", True, id="not-equals-missing-key"),
    pytest.param("app in (web,db)", True, id="in"),
    pytest.param("app in (db)", False, id="in-miss"),
    pytest.param("app notin (db)", True, id="notin"),
    pytest.param("missing notin (db)", True, id="notin-missing-key"),
    pytest.param("app", True, id="exists"),
    pytest.param("!app", False, id="does-not-exist"),
    pytest.param("!missing", True, id="does-not-exist-missing"),
    pytest.param("app=web,tier=front", True, id="and"),
    pytest.param("app=web,tier=back", False, id="and-one-fails"),
    pytest.param(" app = web , tier in ( front ) ", True, id="whitespace"),
    pytest.param("version>2", True, id="gt"),
    pytest.param("version<2", False, id="lt"),
    pytest.param("example.com/app=x", False, id="prefixed-key"),
    pytest.param("app=", False, id="empty-value"),
])
def test_as7_label_selector_string_matches(text: str, matches: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is matches


@pytest.mark.parametrize(("text", "bad_part"), [
    pytest.param("app web", "'web'", id="missing-operator"),
    pytest.param("app in web", "'(' after 'app' in", id="in-without-parens"),
    pytest.param("app in ()", "can't be empty", id="empty-set"),
    pytest.param("app in (a", "')'", id="unclosed"),
    pytest.param("app=web,", "after ','", id="trailing-comma"),
    pytest.param("-app=web", "'-app'", id="bad-key"),
    pytest.param("a/b/c=x", "'a/b/c'", id="two-slashes"),
    pytest.param("app=-web", "'-web'", id="bad-value"),
    pytest.param("app=" + "x" * 64, "no more than 63", id="value-too-long"),
    pytest.param("!", "end of string", id="bang-alone"),
    pytest.param("version>x", "integer", id="gt-not-int"),
])
def test_as7_bad_label_selector_is_bad_request_naming_the_part(text: str, bad_part: str) -> None:
    with pytest.raises(ApiError) as caught:
        LabelSelector.parse(text)
    assert caught.value.reason == Reason.BAD_REQUEST
    assert bad_part in caught.value.message


@pytest.mark.parametrize(("text", "canonical"), [
    pytest.param("tier=front,app=web", "app=web,tier=front", id="sorted-by-key"),
    pytest.param("app in (b,a)", "app in (a,b)", id="sorted-values"),
    pytest.param("a,!b,c notin (x)", "a,!b,c notin (x)", id="exists-forms"),
    pytest.param("", "", id="empty"),
])
def test_as7_label_selector_canonical_string(text: str, canonical: str) -> None:
    selector = LabelSelector.parse(text)
    assert str(selector) == canonical
    assert LabelSelector.parse(str(selector)) == selector


@pytest.mark.parametrize(("sel", "labels", "matches"), [
    pytest.param(None, LABELS, False, id="none-matches-nothing"),
    pytest.param({}, LABELS, True, id="empty-matches-everything"),
    pytest.param({}, None, True, id="empty-matches-unlabelled"),
    pytest.param({"matchLabels": {"app": "web"}}, LABELS, True, id="match-labels"),
    pytest.param({"matchLabels": {"app": "db"}}, LABELS, False, id="match-labels-miss"),
    pytest.param({"matchLabels": {"app": "web"}}, None, False, id="no-labels"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "In",
                                        "values": ["front", "back"]}]}, LABELS, True, id="in"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                        "values": ["front"]}]}, LABELS, False, id="notin"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, LABELS, True,
                 id="exists"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, LABELS,
                 False, id="does-not-exist"),
    pytest.param({"matchLabels": {"app": "web"},
                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]},
                 LABELS, False, id="labels-and-expressions-both-apply"),
])
def test_as7_label_selector_from_dict_follows_label_selector_as_selector(
        sel: dict[str, Any] | None, labels: dict[str, str] | None, matches: bool) -> None:
    assert LabelSelector.from_dict(sel).matches(labels) is matches


def test_as7_empty_and_nothing_selectors_are_distinguished() -> None:
    assert LabelSelector.from_dict({}).empty
    assert not LabelSelector.from_dict(None).empty
    assert not LabelSelector.from_dict({"matchLabels": {"a": "b"}}).empty
    assert str(LabelSelector.from_dict({"matchLabels": {"a": "b"}})) == "a=b"


@pytest.mark.parametrize(("sel", "path", "error_type"), [
    pytest.param({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
                 "spec.selector.matchExpressions[0].operator", "Unsupported value",
                 id="bad-operator"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "In"}]},
                 "spec.selector.matchExpressions[0].values", "Required value",
                 id="in-without-values"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
                 "spec.selector.matchExpressions[0].values", "Forbidden",
                 id="exists-with-values"),
    pytest.param({"matchExpressions": [{"operator": "Exists"}]},
                 "spec.selector.matchExpressions[0].key", "Required value", id="missing-key"),
    pytest.param({"matchExpressions": [{"key": "a", "operator": "In", "values": ["-x"]}]},
                 "spec.selector.matchExpressions[0].values[0]", "Invalid value",
                 id="bad-value"),
    pytest.param({"matchLabels": {"bad key": "x"}}, "spec.selector.matchLabels",
                 "Invalid value", id="bad-match-labels-key"),
    pytest.param("app=web", "spec.selector", "Invalid value", id="not-an-object"),
])
def test_as7_invalid_label_selector_names_the_field_path(sel: Any, path: str,
                                                         error_type: str) -> None:
    errors = validate_label_selector(sel, "spec.selector")
    assert [(e.path, e.type) for e in errors] == [(path, error_type)]
    if isinstance(sel, dict):
        with pytest.raises(ApiError) as caught:
            LabelSelector.from_dict(sel, path="spec.selector")
        assert caught.value.reason == Reason.BAD_REQUEST
        assert path in caught.value.message


@pytest.mark.parametrize(("key", "valid"), [
    pytest.param("app", True, id="simple"),
    pytest.param("app.kubernetes.io/name", True, id="prefixed"),
    pytest.param("A_b-c.D", True, id="mixed-case-name"),
    pytest.param("a" * 63, True, id="name-63"),
    pytest.param("a" * 64, False, id="name-64"),
    pytest.param("x" * 254 + "/a", False, id="prefix-too-long"),
    pytest.param("Example.com/a", False, id="prefix-upper-case"),
    pytest.param("/a", False, id="empty-prefix"),
    pytest.param("a/", False, id="empty-name"),
    pytest.param("", False, id="empty"),
    pytest.param("-a", False, id="leading-dash"),
    pytest.param("a b", False, id="space"),
    pytest.param("a/b/c", False, id="two-slashes"),
])
def test_as7_label_key_is_a_qualified_name(key: str, valid: bool) -> None:
    assert (validate_label_key(key, "metadata.labels") == []) is valid


@pytest.mark.parametrize(("value", "valid"), [
    pytest.param("", True, id="empty"),
    pytest.param("v1.2_3-x", True, id="punctuation-inside"),
    pytest.param("a" * 63, True, id="63"),
    pytest.param("a" * 64, False, id="64"),
    pytest.param("-a", False, id="leading-dash"),
    pytest.param("a/b", False, id="slash"),
    pytest.param(3, False, id="not-a-string"),
])
def test_as7_label_value_rules(value: Any, valid: bool) -> None:
    assert (validate_label_value(value, "metadata.labels") == []) is valid


def test_as7_validate_labels_reports_the_labels_path() -> None:
    errors = validate_labels({"ok": "v", "-bad": "v"}, "metadata.labels")
    assert [e.path for e in errors] == ["metadata.labels"]
    assert "-bad" in str(errors[0])


POD = make_pod("web-1").namespace("prod").node("n1").phase("Running").obj()


@pytest.mark.parametrize(("text", "matches"), [
    pytest.param("", True, id="empty"),
    pytest.param("metadata.name=web-1", True, id="name"),
    pytest.param("metadata.name==web-1", True, id="double-equals"),
    pytest.param("metadata.namespace=prod", True, id="namespace"),
    pytest.param("spec.nodeName=n1", True, id="node-name"),
    pytest.param("spec.nodeName!=n1", False, id="node-name-not"),
    pytest.param("spec.nodeName=", False, id="unscheduled"),
    pytest.param("status.phase=Running,spec.nodeName=n1", True, id="and"),
    pytest.param("status.phase!=Running", False, id="phase-not"),
    pytest.param("spec.missing=", True, id="missing-compares-empty"),
    pytest.param("spec.missing!=", False, id="missing-not-empty"),
])
def test_as7_field_selector_matches(text: str, matches: bool) -> None:
    assert FieldSelector.parse(text).matches(POD) is matches


def test_as7_field_selector_exposes_requirements_for_an_index() -> None:
    selector = FieldSelector.parse("spec.nodeName=n1,status.phase!=Failed")
    assert list(selector.requirements) == [
        ("spec.nodeName", "=", "n1"), ("status.phase", "!=", "Failed")]
    assert selector.exact("spec.nodeName") == "n1"
    assert selector.exact("status.phase") is None
    assert str(selector) == "spec.nodeName=n1,status.phase!=Failed"


def test_as7_field_selector_escaped_comma() -> None:
    selector = FieldSelector.parse(r"metadata.name=a\,b")
    assert selector.requirements[0].value == "a,b"
    assert selector.matches({"metadata": {"name": "a,b"}})


@pytest.mark.parametrize("text", [
    pytest.param("metadata.name", id="no-operator"),
    pytest.param("=x", id="no-field"),
    pytest.param("metadata..name=x", id="bad-path"),
    pytest.param(r"metadata.name=a\x", id="bad-escape"),
])
def test_as7_bad_field_selector_is_bad_request(text: str) -> None:
    with pytest.raises(ApiError) as caught:
        FieldSelector.parse(text)
    assert caught.value.reason == Reason.BAD_REQUEST
