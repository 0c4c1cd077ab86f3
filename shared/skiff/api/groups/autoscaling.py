"""HorizontalPodAutoscaler (autoscaling/v2, also served as autoscaling/v1): its defaults,
validation, `kubectl get hpa` columns and the conversion between the two versions.

Kubernetes stores HPAs in v2 and serves v1 by conversion: v1 has only
`targetCPUUtilizationPercentage`, so every other metric, the current metrics, the
conditions and `behavior` travel in v1 as JSON annotations (v1's MetricSpec is the old
v2beta1 shape) and come back when a v1 client writes what it read. `kubectl autoscale`
writes v1; `kubectl get/describe hpa` read v2.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from skiff.api.columns import age, meta, spec_of
from skiff.api.errors import FieldError, forbidden, invalid, not_supported, required
from skiff.api.fieldschema import CONDITIONS, OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.quantity import parse_quantity
from skiff.api.types import Obj, ObjView

V1, V2 = "autoscaling/v1", "autoscaling/v2"
DEFAULT_CPU_UTILIZATION = 80
METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
TARGET_TYPES = ["AverageValue", "Utilization", "Value"]
POLICY_TYPES = ["Percent", "Pods"]
SELECT_POLICIES = ["Disabled", "Max", "Min"]
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800

# What v1 keeps of v2 in annotations (pkg/apis/autoscaling annotations)
METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION,
                          CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)


# --- defaults -------------------------------------------------------------------------------

def scale_up_rules(given: Mapping[str, Any] | None = None) -> Obj:
    """`behavior.scaleUp` with Kubernetes' defaults for what `given` leaves out."""
    return _rules(given, {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                          "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                       {"type": "Percent", "value": 100,
                                        "periodSeconds": 15}]})


def scale_down_rules(given: Mapping[str, Any] | None = None) -> Obj:
    """`behavior.scaleDown` with Kubernetes' defaults; without a stabilization window the
    controller's `--horizontal-pod-autoscaler-downscale-stabilization` applies."""
    return _rules(given, {"selectPolicy": "Max",
                          "policies": [{"type": "Percent", "value": 100,
                                        "periodSeconds": 15}]})


def _rules(given: Mapping[str, Any] | None, default: Obj) -> Obj:
    rules = dict(default)
    for key in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
        if isinstance(given, Mapping) and given.get(key) is not None:
            rules[key] = copy.deepcopy(given[key])
    return rules


def _default_hpa(obj: Obj) -> None:
    status = obj.setdefault("status", {})
    if isinstance(status, dict):  # Go writes this int32 even when zero; clients require it
        status.setdefault("desiredReplicas", 0)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = scale_up_rules(behavior.get("scaleUp"))
        behavior["scaleDown"] = scale_down_rules(behavior.get("scaleDown"))


def _cpu_metric(utilization: int) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": utilization}}}


# --- validation -----------------------------------------------------------------------------

def _positive_quantity(value: Any) -> bool:
    try:
        return parse_quantity(value) > 0
    except (ValueError, TypeError):
        return False


def _map(value: Any) -> Obj:
    """`value` when it is a map (a dict the caller may change), else an empty one."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_reference(ref: Any, path: str) -> list[FieldError]:
    ref = ref if isinstance(ref, Mapping) else {}
    errors = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not value:
            errors.append(required(f"{path}.{key}"))
        elif not isinstance(value, str) or value in (".", "..") or "/" in value or (
                "%" in value):
            errors.append(invalid(f"{path}.{key}", value,
                                  "may not contain '/' or '%' and may not be '.' or '..'"))
    return errors


def _type(value: Any, path: str, what: str, supported: list[str]) -> list[FieldError]:
    """A required `type` field naming one of `supported`."""
    if not value:
        return [required(path, f"must specify a {what}")]
    if value not in supported:
        return [not_supported(path, value, supported)]
    return []


def _validate_target(target: Any, path: str) -> list[FieldError]:
    if not isinstance(target, Mapping):
        return [required(path)]
    errors = _type(target.get("type"), f"{path}.type", "metric target type", TARGET_TYPES)
    utilization = target.get("averageUtilization")
    if utilization is not None and (not _int(utilization) or utilization < 1):
        errors.append(invalid(f"{path}.averageUtilization", utilization,
                              "must be greater than 0"))
    for key in ("value", "averageValue"):
        if target.get(key) is not None and not _positive_quantity(target[key]):
            errors.append(invalid(f"{path}.{key}", target[key], "must be positive"))
    return errors


def _validate_resource_source(src: Mapping[str, Any], path: str, *,
                              container: bool) -> list[FieldError]:
    errors = []
    if not src.get("name"):
        errors.append(required(f"{path}.name", "must specify a resource name"))
    if container and not src.get("container"):
        errors.append(required(f"{path}.container", "must specify a container"))
    errors += _validate_target(src.get("target"), f"{path}.target")
    target = _map(src.get("target"))
    if target.get("averageUtilization") is None and target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageUtilization",
                               "must set either a target raw value or a target utilization"))
    elif target.get("averageUtilization") is not None and target.get(
            "averageValue") is not None:
        errors.append(forbidden(f"{path}.target.averageValue",
                                "may not set both a target raw value and a target "
                                "utilization"))
    return errors


def _validate_identifier(src: Mapping[str, Any], path: str) -> list[FieldError]:
    metric = src.get("metric")
    if not isinstance(metric, Mapping) or not metric.get("name"):
        return [required(f"{path}.metric.name", "must specify a metric name")]
    return []


def _validate_source(kind: str, src: Mapping[str, Any], path: str) -> list[FieldError]:
    if kind in ("resource", "containerResource"):
        return _validate_resource_source(src, path, container=kind == "containerResource")
    errors = _validate_identifier(src, path) + _validate_target(src.get("target"),
                                                                f"{path}.target")
    target = _map(src.get("target"))
    if kind == "object":
        errors += _validate_reference(src.get("describedObject"), f"{path}.describedObject")
        if target.get("value") is None and target.get("averageValue") is None:
            errors.append(required(f"{path}.target.value",
                                   "must set either a target value or averageValue"))
    elif kind == "pods" and target.get("averageValue") is None:
        errors.append(required(f"{path}.target.averageValue",
                               "must specify a positive target averageValue"))
    elif kind == "external" and target.get("value") is None and target.get(
            "averageValue") is None:
        errors.append(required(f"{path}.target.value",
                               "must set either a target value for metric or a per-pod "
                               "target"))
    return errors


_SOURCE_FIELD = {"Resource": "resource", "ContainerResource": "containerResource",
                 "Pods": "pods", "Object": "object", "External": "external"}


def _validate_metric(metric: Any, path: str) -> list[FieldError]:
    if not isinstance(metric, Mapping):
        return [invalid(path, metric, "must be an object")]
    kind = metric.get("type")
    errors = _type(kind, f"{path}.type", "metric source type", METRIC_TYPES)
    present = [f for f in _SOURCE_FIELD.values() if metric.get(f) is not None]
    expected = _SOURCE_FIELD.get(str(kind), str(kind or "").lower())
    if expected not in present:
        errors.append(required(f"{path}.{expected}",
                               "must populate information for the given metric source"))
    elif isinstance(metric[expected], Mapping):
        errors += _validate_source(expected, metric[expected], f"{path}.{expected}")
    errors += [forbidden(f"{path}.{f}", "must populate the given metric source only")
               for f in present if f != expected]
    return errors


def _validate_rules(rules: Any, path: str) -> list[FieldError]:
    if not isinstance(rules, Mapping):
        return []
    errors = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None:
        if not _int(window) or window < 0:
            errors.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                                  "must be greater than or equal to zero"))
        elif window > MAX_STABILIZATION_WINDOW_SECONDS:
            errors.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                                  f"must be less than or equal to "
                                  f"{MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        errors.append(not_supported(f"{path}.selectPolicy", select, SELECT_POLICIES))
    policies = rules.get("policies")
    if not isinstance(policies, list) or not policies:
        errors.append(required(f"{path}.policies", "must specify at least one Policy"))
        return errors
    for i, policy in enumerate(policies):
        at = f"{path}.policies[{i}]"
        policy = policy if isinstance(policy, Mapping) else {}
        if policy.get("type") not in POLICY_TYPES:
            errors.append(not_supported(f"{at}.type", policy.get("type"), POLICY_TYPES))
        value, period = policy.get("value"), policy.get("periodSeconds")
        if not _int(value) or value <= 0:
            errors.append(invalid(f"{at}.value", value, "must be greater than zero"))
        if not _int(period) or period <= 0:
            errors.append(invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        elif period > MAX_PERIOD_SECONDS:
            errors.append(invalid(f"{at}.periodSeconds", period,
                                  f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return errors


def _validate_hpa(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    errors: list[FieldError] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not _int(low) or low < 1):
        errors.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if not _int(high) or high < 1:
        errors.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
    elif _int(low) and high < low:
        errors.append(invalid("spec.maxReplicas", high,
                              "must be greater than or equal to `minReplicas`"))
    errors += _validate_reference(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = spec.get("metrics") or []
    if not isinstance(metrics, list):
        errors.append(invalid("spec.metrics", metrics, "must be a list"))
    else:
        for i, metric in enumerate(metrics):
            errors += _validate_metric(metric, f"spec.metrics[{i}]")
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for key in ("scaleUp", "scaleDown"):
            errors += _validate_rules(behavior.get(key), f"spec.behavior.{key}")
    status = _map(obj.get("status"))
    for key in ("currentReplicas", "desiredReplicas"):
        value = status.get(key)
        if value is not None and (not _int(value) or value < 0):
            errors.append(invalid(f"status.{key}", value,
                                  "must be greater than or equal to 0"))
    return errors


# --- kubectl get hpa ------------------------------------------------------------------------

def _current(statuses: list[Any], i: int, source: str) -> Obj:
    if i < len(statuses) and isinstance(statuses[i], Mapping):
        current = (statuses[i].get(source) or {}).get("current")
        if isinstance(current, Mapping):
            return dict(current)
    return {}


def _metric_text(spec: Mapping[str, Any], statuses: list[Any], i: int) -> str:
    kind = spec.get("type")
    source = _SOURCE_FIELD.get(str(kind), "")
    src = _map(spec.get(source))
    target = _map(src.get("target"))
    current = _current(statuses, i, source)
    if kind in ("Resource", "ContainerResource"):
        if target.get("averageValue") is not None:
            now = str(current.get("averageValue") or "<unknown>")
            return f"{src.get('name')}: {now}/{target['averageValue']}"
        now = (f"{current['averageUtilization']}%"
               if current.get("averageUtilization") is not None else "<unknown>")
        wanted = (f"{target['averageUtilization']}%"
                  if target.get("averageUtilization") is not None else "<auto>")
        return f"{src.get('name')}: {now}/{wanted}"
    if kind == "Pods":
        return f"{current.get('averageValue') or '<unknown>'}/{target.get('averageValue')}"
    if kind in ("Object", "External"):
        if target.get("averageValue") is not None:
            return (f"{current.get('averageValue') or '<unknown>'}/"
                    f"{target['averageValue']} (avg)")
        return f"{current.get('value') or '<unknown>'}/{target.get('value')}"
    return "<unknown type>"


def targets(hpa: Obj) -> str:
    """kubectl's TARGETS column: each metric's current/target, two at most."""
    specs = (hpa.get("spec") or {}).get("metrics") or []
    if not specs:
        return "<none>"
    statuses = (hpa.get("status") or {}).get("currentMetrics") or []
    shown = [_metric_text(s, statuses, i) for i, s in enumerate(specs)
             if isinstance(s, Mapping)]
    if len(shown) > 2:
        return f"{', '.join(shown[:2])} + {len(shown) - 2} more..."
    return ", ".join(shown)


def _reference(o: Obj) -> str:
    ref = spec_of(o).get("scaleTargetRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


RULES = GroupRules(
    defaulters={"HorizontalPodAutoscaler": _default_hpa},
    validators={"HorizontalPodAutoscaler": _validate_hpa},
    # kubectl's HorizontalPodAutoscaler printer
    columns={"HorizontalPodAutoscaler": [
        ("NAME", meta("name")), ("REFERENCE", _reference), ("TARGETS", targets),
        ("MINPODS", lambda o: str(spec_of(o).get("minReplicas", "<unset>"))),
        ("MAXPODS", lambda o: str(spec_of(o).get("maxReplicas", 0))),
        ("REPLICAS", lambda o: str((o.get("status") or {}).get("currentReplicas", 0))),
        ("AGE", lambda o: age(o["metadata"].get("creationTimestamp")))]},
    schemas={"HorizontalPodAutoscaler": fields(
        *TOP, metadata=OBJECT_META,
        spec=fields("minReplicas", "maxReplicas", "metrics", "behavior",
                    scaleTargetRef=fields("apiVersion", "kind", "name")),
        status=fields("observedGeneration", "lastScaleTime", "currentReplicas",
                      "desiredReplicas", "currentMetrics", conditions=CONDITIONS))},
    # a request in autoscaling/v1 is pruned against that version's fields before conversion
    version_schemas={(V1, "HorizontalPodAutoscaler"): fields(
        *TOP, metadata=OBJECT_META,
        spec=fields("minReplicas", "maxReplicas", "targetCPUUtilizationPercentage",
                    scaleTargetRef=fields("apiVersion", "kind", "name")),
        status=fields("observedGeneration", "lastScaleTime", "currentReplicas",
                      "desiredReplicas", "currentCPUUtilizationPercentage"))},
)


# --- v1 <-> v2 ------------------------------------------------------------------------------
# v1's MetricSpec/MetricStatus (the annotations) are v2beta1's shape: flat `target*`/`current*`
# fields where v2 has `target`/`current` objects and a `metric` identifier.

def _v1_metric(metric: Mapping[str, Any], *, status: bool) -> Obj:
    """One v2 MetricSpec (or MetricStatus) in v1's annotation shape."""
    kind = str(metric.get("type", ""))
    source = _SOURCE_FIELD.get(kind, "")
    src = dict(metric.get(source) or {})
    values = dict(src.get("current" if status else "target") or {})
    prefix = "current" if status else "target"
    ident = dict(src.get("metric") or {})
    out: Obj = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = src.get("name")
        if kind == "ContainerResource":
            out["container"] = src.get("container")
        if values.get("averageUtilization") is not None:
            out[f"{prefix}AverageUtilization"] = values["averageUtilization"]
        if values.get("averageValue") is not None:
            out[f"{prefix}AverageValue"] = values["averageValue"]
    elif kind == "Pods":
        out["metricName"] = ident.get("name")
        if ident.get("selector") is not None:
            out["selector"] = ident["selector"]
        out[f"{prefix}AverageValue"] = values.get("averageValue")
    elif kind == "Object":
        out["target"] = src.get("describedObject")
        out["metricName"] = ident.get("name")
        if ident.get("selector") is not None:
            out["selector"] = ident["selector"]
        out[f"{prefix}Value"] = values.get("value")
        if values.get("averageValue") is not None:
            out["averageValue"] = values["averageValue"]
    elif kind == "External":
        out["metricName"] = ident.get("name")
        if ident.get("selector") is not None:
            out["metricSelector"] = ident["selector"]
        if values.get("value") is not None:
            out[f"{prefix}Value"] = values["value"]
        if values.get("averageValue") is not None:
            out[f"{prefix}AverageValue"] = values["averageValue"]
    return {"type": kind, source: {k: v for k, v in out.items() if v is not None}}


def _v2_metric(metric: Mapping[str, Any], *, status: bool) -> Obj:
    """The inverse of `_v1_metric`."""
    kind = str(metric.get("type", ""))
    source = _SOURCE_FIELD.get(kind, "")
    src = dict(metric.get(source) or {})
    prefix = "current" if status else "target"
    values: Obj = {}
    out: Obj = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = src.get("name")
        if kind == "ContainerResource":
            out["container"] = src.get("container")
        if src.get(f"{prefix}AverageUtilization") is not None:
            values.update(type="Utilization",
                          averageUtilization=src[f"{prefix}AverageUtilization"])
        if src.get(f"{prefix}AverageValue") is not None:
            values.setdefault("type", "AverageValue")
            values["averageValue"] = src[f"{prefix}AverageValue"]
    elif kind == "Pods":
        out["metric"] = {"name": src.get("metricName"), "selector": src.get("selector")}
        values.update(type="AverageValue", averageValue=src.get(f"{prefix}AverageValue"))
    elif kind == "Object":
        out["describedObject"] = src.get("target")
        out["metric"] = {"name": src.get("metricName"), "selector": src.get("selector")}
        if src.get("averageValue") is not None:
            values.update(type="AverageValue", averageValue=src["averageValue"])
        else:
            values.update(type="Value", value=src.get(f"{prefix}Value"))
    elif kind == "External":
        out["metric"] = {"name": src.get("metricName"),
                         "selector": src.get("metricSelector")}
        if src.get(f"{prefix}AverageValue") is not None:
            values.update(type="AverageValue",
                          averageValue=src[f"{prefix}AverageValue"])
        else:
            values.update(type="Value", value=src.get(f"{prefix}Value"))
    if status:
        values.pop("type", None)
    out["current" if status else "target"] = {k: v for k, v in values.items()
                                              if v is not None}
    if isinstance(out.get("metric"), dict):
        out["metric"] = {k: v for k, v in out["metric"].items() if v is not None}
    return {"type": kind, source: {k: v for k, v in out.items() if v is not None}}


def _is_cpu_utilization(metric: Any, *, status: bool) -> bool:
    if not isinstance(metric, Mapping) or metric.get("type") != "Resource":
        return False
    src = metric.get("resource") or {}
    values = src.get("current" if status else "target") or {}
    return src.get("name") == "cpu" and values.get("averageUtilization") is not None


def to_v1(hpa: Mapping[str, Any]) -> Obj:
    """A stored (v2) HPA as autoscaling/v1 shows it."""
    out = copy.deepcopy(dict(hpa))
    out["apiVersion"] = V1
    spec, status = dict(out.pop("spec", None) or {}), dict(out.pop("status", None) or {})
    metrics = [m for m in spec.get("metrics") or [] if isinstance(m, Mapping)]
    v1_spec: Obj = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas")
                    if k in spec}
    cpu = next((m for m in metrics if _is_cpu_utilization(m, status=False)), None)
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"][
            "averageUtilization"]
    v1_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime",
                                             "currentReplicas", "desiredReplicas")
                      if k in status}
    v1_status.setdefault("currentReplicas", 0)
    v1_status.setdefault("desiredReplicas", 0)
    current = [m for m in status.get("currentMetrics") or [] if isinstance(m, Mapping)]
    cpu_now = next((m for m in current if _is_cpu_utilization(m, status=True)), None)
    if cpu_now is not None:
        v1_status["currentCPUUtilizationPercentage"] = cpu_now["resource"]["current"][
            "averageUtilization"]
    notes: dict[str, Any] = {}
    others = [_v1_metric(m, status=False) for m in metrics if m is not cpu]
    if others:
        notes[METRICS_ANNOTATION] = others
    if current:
        notes[CURRENT_METRICS_ANNOTATION] = [_v1_metric(m, status=True) for m in current]
    if status.get("conditions"):
        notes[CONDITIONS_ANNOTATION] = status["conditions"]
    if spec.get("behavior") is not None:
        notes[BEHAVIOR_ANNOTATION] = spec["behavior"]
    if notes:
        meta = out.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **{
            k: json.dumps(v, separators=(",", ":")) for k, v in notes.items()}}
    out["spec"], out["status"] = v1_spec, v1_status
    return out


class ConversionError(ValueError):
    """An annotation of a v1 HPA that is not the JSON v1 keeps there."""

    def __init__(self, annotation: str) -> None:
        super().__init__(f"metadata.annotations[{annotation}]: not valid JSON of the kind "
                         "autoscaling/v1 keeps there; remove it or copy it from a GET")
        self.annotation = annotation


def to_v2(hpa: Mapping[str, Any]) -> Obj:
    """An autoscaling/v1 HPA as stored (v2); the round-trip annotations are taken back."""
    out = copy.deepcopy(dict(hpa))
    out["apiVersion"] = V2
    spec = out.pop("spec", None)
    spec = dict(spec) if isinstance(spec, Mapping) else {}
    status = out.pop("status", None)
    status = dict(status) if isinstance(status, Mapping) else {}
    meta = _map(out.get("metadata"))
    annotations = _map(meta.get("annotations"))
    notes: Obj = {}
    for key in ROUND_TRIP_ANNOTATIONS:
        if key in annotations:
            try:
                notes[key] = json.loads(annotations.pop(key))
            except (TypeError, ValueError):
                raise ConversionError(key) from None
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    v2_spec: Obj = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas")
                    if k in spec}
    metrics: list[Obj] = []
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec["targetCPUUtilizationPercentage"]))
    metrics += [_v2_metric(m, status=False) for m in _list(notes, METRICS_ANNOTATION)]
    if metrics:
        v2_spec["metrics"] = metrics
    if isinstance(notes.get(BEHAVIOR_ANNOTATION), dict):
        v2_spec["behavior"] = notes[BEHAVIOR_ANNOTATION]
    v2_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime",
                                             "currentReplicas", "desiredReplicas")
                      if k in status}
    if CURRENT_METRICS_ANNOTATION in notes:
        v2_status["currentMetrics"] = [_v2_metric(m, status=True)
                                       for m in _list(notes, CURRENT_METRICS_ANNOTATION)]
    elif status.get("currentCPUUtilizationPercentage") is not None:
        v2_status["currentMetrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "current": {
                "averageUtilization": status["currentCPUUtilizationPercentage"]}}}]
    if CONDITIONS_ANNOTATION in notes:
        v2_status["conditions"] = _list(notes, CONDITIONS_ANNOTATION)
    out["spec"] = v2_spec
    if v2_status:
        out["status"] = v2_status
    return out


def _list(notes: Obj, key: str) -> list[Obj]:
    value = notes.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConversionError(key)
    return value


__all__ = ["BEHAVIOR_ANNOTATION", "CONDITIONS_ANNOTATION", "CURRENT_METRICS_ANNOTATION",
           "METRICS_ANNOTATION", "RULES", "V1", "V2", "ConversionError",
           "scale_down_rules", "scale_up_rules", "targets", "to_v1", "to_v2"]
