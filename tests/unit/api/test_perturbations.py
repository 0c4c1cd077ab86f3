"""Issue 35 (CT1) object shape: a skiff.io/v1 Perturbation's validation messages and field
paths, what an update may change, its kubectl columns and its known fields."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, prune_unknown_fields, validate
from skiff.api import tables as printers
from skiff.api.types import Obj

USER = "system:serviceaccount:shop:operator"


def _pert(*, subject: Any = None, **spec: Any) -> Obj:
    body: Obj = {"subject": {"user": USER} if subject is None else subject, **spec}
    return {"apiVersion": "skiff.io/v1", "kind": "Perturbation",
            "metadata": {"name": "op-stale"}, "spec": body}


def _messages(obj: Obj, old: Obj | None = None) -> list[str]:
    return [str(e) for e in validate(obj, old=old)]


@pytest.mark.parametrize("obj", [
    pytest.param(_pert(staleView={"revision": 1234}), id="pinned"),
    pytest.param(_pert(staleView={"lagRevisions": 20}), id="lag-revisions"),
    pytest.param(_pert(subject={"group": "ops"}, staleView={"lagSeconds": 5}),
                 id="group-lag-seconds"),
    pytest.param(_pert(missedEvents={}), id="all-events"),
    pytest.param(_pert(missedEvents={
        "resources": ["pods", "crontabs.stable.example.com"], "types": ["MODIFIED"],
        "names": ["web-0", "shop/db-0"], "coalesceSeconds": 0}), id="missed-events"),
    pytest.param(_pert(staleView={"revision": 7}, missedEvents={"types": ["DELETED"],
                                                                "coalesceSeconds": 3}),
                 id="both"),
])
def test_ct1_valid_perturbations_pass_and_prune_to_nothing(obj: Obj) -> None:
    apply_defaults(obj)
    assert _messages(obj) == []
    assert prune_unknown_fields(obj) == []


@pytest.mark.parametrize(("subject", "message"), [
    pytest.param({}, "spec.subject: Required value: must specify one of: `user`, `group`",
                 id="none"),
    pytest.param({"user": USER, "group": "ops"},
                 "spec.subject.group: Forbidden: may not specify more than one of: "
                 "`user`, `group`", id="both"),
    pytest.param({"user": ""}, "spec.subject.user: Required value", id="empty-user"),
    pytest.param({"group": 3}, "spec.subject.group: Invalid value: 3: must be a string",
                 id="not-a-string"),
])
def test_ct1_perturbation_needs_exactly_one_subject(subject: Obj, message: str) -> None:
    assert message in _messages(_pert(subject=subject, staleView={"revision": 1}))


def test_ct1_perturbation_without_subject_names_it() -> None:
    obj = _pert(staleView={"revision": 1})
    del obj["spec"]["subject"]
    assert ("spec.subject: Required value: must specify one of: `user`, `group`"
            in _messages(obj))


def test_ct1_perturbation_needs_stale_view_or_missed_events() -> None:
    assert _messages(_pert()) == [
        "spec: Required value: must specify at least one of: `staleView`, `missedEvents`, "
        "`crashOnWrite`, `record`"]


@pytest.mark.parametrize(("stale", "message"), [
    pytest.param({}, "spec.staleView: Required value: must specify one of: `revision`, "
                     "`lagRevisions`, `lagSeconds`, `fromWrite`", id="empty"),
    pytest.param({"revision": 5, "lagSeconds": 2},
                 "spec.staleView.lagSeconds: Forbidden: may not specify more than one of: "
                 "`revision`, `lagRevisions`, `lagSeconds`, `fromWrite`", id="two"),
    pytest.param({"fromWrite": 0}, "spec.staleView.fromWrite: Invalid value: 0: must be "
                                   "greater than 0", id="from-write-zero"),
    pytest.param({"revision": 0}, "spec.staleView.revision: Invalid value: 0: must be "
                                  "greater than 0", id="revision-zero"),
    pytest.param({"lagRevisions": -1}, "spec.staleView.lagRevisions: Invalid value: -1: "
                                       "must be greater than 0", id="negative-lag"),
    pytest.param({"lagSeconds": "5"}, 'spec.staleView.lagSeconds: Invalid value: "5": '
                                      "must be an integer", id="string-seconds"),
    pytest.param("soon", 'spec.staleView: Invalid value: "soon": must be an object',
                 id="not-an-object"),
])
def test_ct1_stale_view_is_exactly_one_positive_choice(stale: Any, message: str) -> None:
    assert message in _messages(_pert(staleView=stale))


@pytest.mark.parametrize(("missed", "message"), [
    pytest.param({"types": ["UPDATED"]},
                 'spec.missedEvents.types[0]: Unsupported value: "UPDATED": supported '
                 'values: "ADDED", "MODIFIED", "DELETED"', id="bad-type"),
    pytest.param({"types": ["ADDED", "ADDED"]},
                 'spec.missedEvents.types[1]: Duplicate value: "ADDED"', id="dup-type"),
    pytest.param({"resources": ["pods", ""]},
                 "spec.missedEvents.resources[1]: Required value", id="empty-resource"),
    pytest.param({"resources": [3]},
                 "spec.missedEvents.resources[0]: Invalid value: 3: must be a string",
                 id="resource-not-string"),
    pytest.param({"resources": "pods"},
                 'spec.missedEvents.resources: Invalid value: "pods": must be a list',
                 id="resources-not-list"),
    pytest.param({"names": [""]}, "spec.missedEvents.names[0]: Required value",
                 id="empty-name"),
    pytest.param({"coalesceSeconds": -1},
                 "spec.missedEvents.coalesceSeconds: Invalid value: -1: must be greater "
                 "than or equal to 0", id="negative-coalesce"),
])
def test_ct1_missed_events_fields_are_checked(missed: Obj, message: str) -> None:
    assert message in _messages(_pert(missedEvents=missed))


def test_ct1_subject_is_immutable_but_the_perturbation_may_change() -> None:
    old = _pert(staleView={"revision": 10})
    assert _messages(_pert(staleView={"lagSeconds": 3}, missedEvents={}), old) == []
    moved = _messages(_pert(subject={"group": "ops"}, staleView={"revision": 10}), old)
    assert moved == ['spec.subject: Invalid value: {"group": "ops"}: field is immutable']


def test_ct1_unknown_fields_are_named() -> None:
    obj = _pert(staleView={"revision": 1, "lagMinutes": 2}, madeUp=1)
    assert sorted(prune_unknown_fields(obj)) == ["spec.madeUp", "spec.staleView.lagMinutes"]
    assert "madeUp" not in obj["spec"]


@pytest.mark.parametrize(("spec", "row"), [
    pytest.param({"staleView": {"revision": 1234}}, ["@1234", "<none>"], id="pinned"),
    pytest.param({"staleView": {"lagRevisions": 20}}, ["-20 rev", "<none>"], id="lag-rev"),
    pytest.param({"staleView": {"lagSeconds": 5}, "missedEvents": {
        "types": ["MODIFIED"], "resources": ["pods"]}}, ["-5s", "MODIFIED pods"],
        id="lag-seconds-and-missed"),
    pytest.param({"missedEvents": {"names": ["web-0"], "coalesceSeconds": 2}},
                 ["<none>", "ALL ALL/web-0 (held 2s)"], id="all-coalesced"),
])
def test_ct1_kubectl_columns_show_subject_view_and_missed_events(spec: Obj,
                                                                 row: list[str]) -> None:
    obj = _pert(**spec)
    columns = printers.columns_for("Perturbation")
    assert [title for title, _ in columns] == ["NAME", "SUBJECT", "STALE VIEW",
                                               "MISSED EVENTS", "AGE"]
    assert [show(obj) for _, show in columns[:4]] == ["op-stale", f"user={USER}", *row]
    assert printers.render([obj], "Perturbation").splitlines()[0].startswith("NAME ")
