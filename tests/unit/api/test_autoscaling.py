"""HorizontalPodAutoscaler's API rules: v2 defaults and validation, kubectl's columns, and the
autoscaling/v1 <-> v2 conversion that lets `kubectl autoscale` (v1) and `kubectl get hpa`
(v2) share one stored object."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from skiff.api.defaults import apply_defaults
from skiff.api.groups import autoscaling
from skiff.api.schema import prune_unknown_fields
from skiff.api.tables import columns_for
from skiff.api.types import Obj
from skiff.api.validation import validate


def hpa(**spec: Any) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"}, "maxReplicas": 5, **spec}}


def messages(obj: Obj) -> list[str]:
    return [f"{e.path}: {e.detail}" for e in validate(obj)]


MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {
    "type": "AverageValue", "averageValue": "100Mi"}}}
PODS = {"type": "Pods", "pods": {"metric": {"name": "packets-per-second"},
                                 "target": {"type": "AverageValue", "averageValue": "1k"}}}
OBJECT = {"type": "Object", "object": {
    "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                        "name": "main-route"},
    "metric": {"name": "requests-per-second"},
    "target": {"type": "Value", "value": "10k"}}}
EXTERNAL = {"type": "External", "external": {
    "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "w"}}},
    "target": {"type": "AverageValue", "averageValue": "30"}}}


def test_defaults_fill_min_replicas_and_the_cpu_metric() -> None:
    obj = hpa()
    apply_defaults(obj)
    assert obj["spec"]["minReplicas"] == 1
    assert obj["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert "behavior" not in obj["spec"]  # only filled in when given
    # the official client refuses a v2 status without it (Go always writes the int32)
    assert obj["status"] == {"desiredReplicas": 0}


def test_defaults_complete_a_partial_behavior() -> None:
    obj = hpa(behavior={"scaleDown": {"stabilizationWindowSeconds": 60}})
    apply_defaults(obj)
    behavior = obj["spec"]["behavior"]
    assert behavior["scaleDown"] == {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                                     "policies": [{"type": "Percent", "value": 100,
                                                   "periodSeconds": 15}]}
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleUp"]["policies"] == [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"minReplicas": 0}, "spec.minReplicas: must be greater than or equal to 1"),
    ({"maxReplicas": 0}, "spec.maxReplicas: must be greater than 0"),
    ({"minReplicas": 6}, "spec.maxReplicas: must be greater than or equal to `minReplicas`"),
    ({"scaleTargetRef": {"kind": "Deployment"}}, "spec.scaleTargetRef.name: "),
    ({"scaleTargetRef": {"kind": "Deployment", "name": "a/b"}},
     "spec.scaleTargetRef.name: may not contain '/'"),
    ({"metrics": [{"type": "Resource"}]},
     "spec.metrics[0].resource: must populate information for the given metric source"),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization"}}}]},
     "spec.metrics[0].resource.target.averageUtilization: must set either a target raw "
     "value or a target utilization"),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 0}}}]},
     "spec.metrics[0].resource.target.averageUtilization: must be greater than 0"),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Percent", "averageUtilization": 50}}}]},
     "spec.metrics[0].resource.target.type: "),
    ({"metrics": [{**MEMORY, "pods": PODS["pods"]}]},
     "spec.metrics[0].pods: must populate the given metric source only"),
    ({"metrics": [{"type": "Queue"}]}, "spec.metrics[0].type: "),
    ({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 3601, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 15}]}}},
     "spec.behavior.scaleUp.stabilizationWindowSeconds: must be less than or equal to 3600"),
    ({"behavior": {"scaleDown": {"policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 1801}]}}},
     "spec.behavior.scaleDown.policies[0].periodSeconds: must be less than or equal to 1800"),
    ({"behavior": {"scaleDown": {"policies": []}}},
     "spec.behavior.scaleDown.policies: must specify at least one Policy"),
    ({"behavior": {"scaleDown": {"selectPolicy": "Most", "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 15}]}}},
     "spec.behavior.scaleDown.selectPolicy: "),
])
def test_validation_names_the_field_and_the_rule(spec: Obj, expected: str) -> None:
    obj = hpa(**spec)
    if "scaleTargetRef" in spec:
        obj["spec"]["scaleTargetRef"] = spec["scaleTargetRef"]
    apply_defaults(obj)
    found = messages(obj)
    assert any(m.startswith(expected) for m in found), found


def test_valid_hpas_of_every_metric_type_pass() -> None:
    obj = hpa(minReplicas=2, metrics=[MEMORY, PODS, OBJECT, EXTERNAL, {
        "type": "ContainerResource", "containerResource": {
            "name": "cpu", "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 60}}}],
        behavior={"scaleDown": {"stabilizationWindowSeconds": 30, "policies": [
            {"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    apply_defaults(obj)
    assert messages(obj) == []


def _targets(obj: Obj) -> str:
    return dict(columns_for("HorizontalPodAutoscaler"))["TARGETS"](obj)


def test_kubectl_columns_show_each_metric_current_and_target() -> None:
    obj = hpa(minReplicas=2, metrics=[
        {"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": 50}}}, MEMORY])
    assert _targets(obj) == "cpu: <unknown>/50%, memory: <unknown>/100Mi"
    obj["status"] = {"currentReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": 72, "averageValue": "72m"}}},
        {"type": "Resource", "resource": {"name": "memory", "current": {
            "averageValue": "52Mi"}}}]}
    row = {name: fn(obj) for name, fn in columns_for("HorizontalPodAutoscaler")}
    assert (row["REFERENCE"], row["TARGETS"], row["MINPODS"], row["MAXPODS"],
            row["REPLICAS"]) == ("Deployment/web", "cpu: 72%/50%, memory: 52Mi/100Mi", "2",
                                 "5", "3")
    obj["spec"]["metrics"] += [PODS, EXTERNAL]
    assert _targets(obj).endswith(" + 2 more...")


def test_v1_shows_the_cpu_target_and_keeps_the_rest_in_annotations() -> None:
    stored = hpa(minReplicas=2, metrics=[
        {"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": 50}}}, MEMORY, PODS, OBJECT,
        EXTERNAL], behavior={"scaleDown": {"stabilizationWindowSeconds": 30}})
    stored["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": 75, "averageValue": "150m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
                        "lastTransitionTime": "2026-11-25T00:00:00Z", "message": "m"}]}
    v1 = autoscaling.to_v1(stored)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {"scaleTargetRef": stored["spec"]["scaleTargetRef"],
                          "minReplicas": 2, "maxReplicas": 5,
                          "targetCPUUtilizationPercentage": 50}
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 3,
                            "currentCPUUtilizationPercentage": 75}
    notes = v1["metadata"]["annotations"]
    others = json.loads(notes[autoscaling.METRICS_ANNOTATION])
    assert others[0] == {"type": "Resource", "resource": {"name": "memory",
                                                          "targetAverageValue": "100Mi"}}
    assert others[1] == {"type": "Pods", "pods": {"metricName": "packets-per-second",
                                                  "targetAverageValue": "1k"}}
    assert json.loads(notes[autoscaling.BEHAVIOR_ANNOTATION]) == stored["spec"]["behavior"]
    assert prune_unknown_fields(copy.deepcopy(v1)) == []  # only v1's own fields
    assert autoscaling.to_v2(v1) == stored  # and back, nothing lost


def test_v1_without_a_cpu_target_converts_to_no_metrics_for_the_defaults() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web"}, "spec": {"scaleTargetRef": {
              "kind": "Deployment", "name": "web"}, "maxReplicas": 3}}
    v2 = autoscaling.to_v2(v1)
    assert "metrics" not in v2["spec"]
    apply_defaults(v2)
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_v1_with_a_broken_metrics_annotation_is_refused_by_name() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web", "annotations": {
              autoscaling.METRICS_ANNOTATION: "{not json"}},
          "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                   "maxReplicas": 3}}
    with pytest.raises(autoscaling.ConversionError,
                       match=r"metadata.annotations\[autoscaling.alpha.kubernetes.io/metrics\]"):
        autoscaling.to_v2(v1)


def test_v1_fields_are_pruned_against_v1s_schema() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web"},
          "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                   "maxReplicas": 3, "targetCPUUtilizationPercentage": 50,
                   "metrics": []}}
    assert prune_unknown_fields(v1) == ["spec.metrics"]  # a v2 field sent to v1
