"""SPEC PS4: ReplicationController defaults and validation as Kubernetes' (selector and
labels from the template, an equality selector that must match it, restartPolicy Always),
and its selector read as a LabelSelector by the controller and the scale subresource."""

from __future__ import annotations

import copy

from skiff.api import validate
from skiff.api.defaults import apply_defaults
from skiff.api.selectors import LabelSelector, workload_selector
from skiff.api.types import Obj

RC: Obj = {"apiVersion": "v1", "kind": "ReplicationController",
           "metadata": {"name": "nginx", "namespace": "default"},
           "spec": {"template": {"metadata": {"labels": {"app": "nginx"}},
                                 "spec": {"containers": [{"name": "nginx",
                                                          "image": "nginx"}]}}}}


def test_ps4_rc_selector_labels_and_replicas_default_from_the_template() -> None:
    rc = copy.deepcopy(RC)
    apply_defaults(rc)
    assert rc["spec"]["selector"] == {"app": "nginx"}
    assert rc["metadata"]["labels"] == {"app": "nginx"}
    assert rc["spec"]["replicas"] == 1
    assert not validate(rc)


def test_ps4_rc_keeps_its_own_selector_and_labels() -> None:
    rc = copy.deepcopy(RC)
    rc["metadata"]["labels"] = {"tier": "web"}
    rc["spec"]["selector"] = {"app": "nginx"}
    rc["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    apply_defaults(rc)
    assert rc["metadata"]["labels"] == {"tier": "web"}
    assert rc["spec"]["selector"] == {"app": "nginx"}
    assert not validate(rc)


def test_ps4_rc_selector_must_match_and_restart_always() -> None:
    rc = copy.deepcopy(RC)
    rc["spec"]["selector"] = {"app": "other"}
    rc["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    rc["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5
    errors = [str(e) for e in validate(rc)]
    assert any(e.startswith("spec.template.metadata.labels: Invalid value")
               and e.endswith("`selector` does not match template `labels`") for e in errors)
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported ' \
           'values: "Always"' in errors
    assert ("spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
            "ReplicationController is not Supported") in errors


def test_ps4_rc_without_selector_or_template_labels_is_invalid() -> None:
    rc = copy.deepcopy(RC)
    del rc["spec"]["template"]["metadata"]
    apply_defaults(rc)
    assert "spec.selector: Required value" in [str(e) for e in validate(rc)]


def test_ps4_rc_selector_reads_as_match_labels() -> None:
    rc = copy.deepcopy(RC)
    apply_defaults(rc)
    selector = LabelSelector.from_dict(workload_selector(rc))
    assert str(selector) == "app=nginx"
    assert selector.matches({"app": "nginx", "x": "y"}) and not selector.matches({})
    rs = {"kind": "ReplicaSet", "spec": {"selector": {"matchLabels": {"a": "b"}}}}
    assert workload_selector(rs) == {"matchLabels": {"a": "b"}}
