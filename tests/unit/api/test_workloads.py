"""Defaults, validation and columns of the issue-16 kinds, as Kubernetes has them."""

from __future__ import annotations

from typing import Any

from skiff.api import apply_defaults, tables, validate
from skiff.api.ownership import FOREGROUND_FINALIZER, ORPHAN_FINALIZER, propagation_finalizer
from skiff.api.types import Obj

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def deployment(**spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE,
                     **spec}}


def test_issue16_deployment_defaults_are_kubernetes() -> None:
    d = deployment()
    apply_defaults(d)
    assert d["spec"]["replicas"] == 1
    assert d["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "25%", "maxSurge": "25%"}}
    assert d["spec"]["revisionHistoryLimit"] == 10
    assert d["spec"]["progressDeadlineSeconds"] == 600
    assert validate(d) == []


def test_issue16_deployment_validation_names_the_field() -> None:
    both_zero = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": 0, "maxUnavailable": 0}})
    assert [e.path for e in validate(both_zero)] == [
        "spec.strategy.rollingUpdate.maxUnavailable"]
    recreate = deployment(strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}})
    assert [e.path for e in validate(recreate)] == ["spec.strategy.rollingUpdate"]


def test_issue16_job_gets_a_generated_selector_and_defaults() -> None:
    job: Obj = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "once", "namespace": "default", "uid": "u-1"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox", "command": ["true"]}]}}}}
    apply_defaults(job)
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"]["job-name"] == "once"
    assert validate(job) == []
    always = {**job, "spec": {**spec, "template": {**spec["template"], "spec": {
        **spec["template"]["spec"], "restartPolicy": "Always"}}}}
    assert [e.path for e in validate(always)] == ["spec.template.spec.restartPolicy"]


def test_issue16_secret_string_data_becomes_base64_data() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "s", "namespace": "default"},
              "stringData": {"password": "s3cret"}}
    apply_defaults(secret)
    assert secret["data"] == {"password": "czNjcmV0"} and secret["type"] == "Opaque"
    assert "stringData" not in secret


def test_issue16_service_defaults_and_columns() -> None:
    svc: Obj = {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "front", "namespace": "default"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    apply_defaults(svc)
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert validate(svc) == []
    headers = [name for name, _ in tables.columns_for("Service")]
    assert headers == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert [fn(svc) for name, fn in tables.columns_for("Service")][4] == "80/TCP"


def test_issue16_cascade_flags_map_to_finalizers() -> None:
    assert propagation_finalizer("Background") is None
    assert propagation_finalizer("Foreground") == FOREGROUND_FINALIZER
    assert propagation_finalizer("Orphan") == ORPHAN_FINALIZER
    assert propagation_finalizer(None, orphan_dependents=True) == ORPHAN_FINALIZER
