"""Validation of updates rejects what Kubernetes rejects (AS7: pod update rules, immutable
fields; GT: no new finalizers while terminating)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.testing import make_pod
from skiff.api.validation import validate_ephemeral_containers_update
from tests.unit.api.objpaths import paths, with_

POD = make_pod("web").container("c", command=["sleep", "1"]).obj()

BOUND = make_pod("web").uid("u1").container("c", image="app:v1") \
    .toleration("a", operator="Exists").scheduling_gate("g1").scheduling_gate("g2") \
    .node("n1").obj()


@pytest.mark.parametrize(("path", "value"), [
    pytest.param("spec.containers[0].image", "app:v2", id="image"),
    pytest.param("spec.activeDeadlineSeconds", 30, id="active-deadline-set"),
    pytest.param("spec.tolerations[1]", {"key": "b", "operator": "Exists"},
                 id="toleration-added"),
    pytest.param("spec.schedulingGates", [{"name": "g2"}], id="gate-removed"),
    pytest.param("metadata.labels", {"new": "label"}, id="labels"),
    pytest.param("status.phase", "Running", id="status"),
])
def test_as7_allowed_pod_updates(path: str, value: Any) -> None:
    assert validate(with_(BOUND, path, value), old=BOUND) == []


@pytest.mark.parametrize(("path", "value", "expected"), [
    pytest.param("spec.nodeName", "n2", ("spec", "Forbidden"), id="node-name"),
    pytest.param("spec.containers[0].command", ["x"], ("spec", "Forbidden"), id="command"),
    pytest.param("spec.restartPolicy", "Never", ("spec", "Forbidden"), id="restart-policy"),
    pytest.param("spec.tolerations", [], ("spec.tolerations", "Forbidden"),
                 id="toleration-removed"),
    pytest.param("spec.schedulingGates[2]", {"name": "g3"}, ("spec.schedulingGates", "Forbidden"),
                 id="gate-added"),
    pytest.param("metadata.name", "other", ("metadata.name", "Invalid value"), id="name"),
    pytest.param("metadata.namespace", "other", ("metadata.namespace", "Invalid value"),
                 id="namespace"),
    pytest.param("metadata.uid", "u2", ("metadata.uid", "Invalid value"), id="uid"),
    pytest.param("metadata.creationTimestamp", "2024-01-01T00:00:00Z",
                 ("metadata.creationTimestamp", "Invalid value"), id="creation-timestamp"),
])
def test_as7_forbidden_pod_updates(path: str, value: Any, expected: tuple[str, str]) -> None:
    assert paths(with_(BOUND, path, value), BOUND) == [expected]


def test_as7_pod_update_message_names_allowed_and_changed_fields() -> None:
    errors = validate(with_(BOUND, "spec.nodeName", "n2"), old=BOUND)
    assert "pod updates may not change fields other than" in str(errors[0])
    assert "spec.nodeName" in str(errors[0])
    assert "immutable" in str(validate(with_(BOUND, "metadata.uid", "x"), old=BOUND)[0])


def test_as7_active_deadline_may_only_shrink() -> None:
    old = with_(BOUND, "spec.activeDeadlineSeconds", 30)
    assert paths(with_(old, "spec.activeDeadlineSeconds", 60), old) == [
        ("spec.activeDeadlineSeconds", "Invalid value")]
    assert validate(with_(old, "spec.activeDeadlineSeconds", 10), old=old) == []


def test_gt_no_new_finalizers_while_terminating() -> None:
    old = make_pod("p").terminating().obj()
    new = with_(old, "metadata.finalizers", ["example.com/late"])
    assert paths(new, old) == [("metadata.finalizers", "Forbidden")]


def test_as7_removed_tolerations_are_one_error_in_kubernetes_words() -> None:
    two = with_(BOUND, "spec.tolerations[1]", {"key": "b", "operator": "Exists"})
    errors = validate(with_(two, "spec.tolerations", []), old=two)
    toleration_errors = [e for e in errors if e.path == "spec.tolerations"]
    assert [str(e) for e in toleration_errors] == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its "
        "tolerationSeconds"]  # no Python dict in the message, once as in Kubernetes


def test_as1_namespaces_carry_the_metadata_name_label() -> None:
    ns: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "team-a", "labels": {"x": "y"}}}
    apply_defaults(ns)
    assert ns["metadata"]["labels"] == {"x": "y", "kubernetes.io/metadata.name": "team-a"}
    ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = "other"  # kept to the name
    apply_defaults(ns)
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"


def test_as7_the_documentations_dns_config_example_is_valid() -> None:
    pod = with_(with_(POD, "spec.dnsPolicy", "None"), "spec.dnsConfig", {
        "nameservers": ["192.0.2.1"],
        "searches": ["ns1.svc.cluster-domain.example", "my.dns.search.suffix"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]})
    assert paths(pod) == []


def test_as7_ephemeral_containers_update_reports_garbage_shapes_instead_of_raising() -> None:
    old: dict[str, Any] = {"kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    for garbage in ([], "x", 3, [1], [{"name": ["x"], "targetContainerName": ["c"]}],
                    [{"name": "d", "image": "i", "resources": "x"}]):
        new = {**old, "spec": {**old["spec"], "ephemeralContainers": garbage}}
        errors = validate_ephemeral_containers_update(new, old)
        assert bool(errors) == (garbage != []), (garbage, errors)
