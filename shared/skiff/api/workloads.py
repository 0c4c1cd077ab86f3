"""The kinds real manifests bring (issue 16): Deployment, DaemonSet, ControllerRevision, Job,
Service, EndpointSlice, ConfigMap and Secret.

Their defaults, validation, known fields and kubectl's table columns live here, in one module,
and are registered into the per-kind tables of `defaults`, `validation`, `schema` and
`tables` when `skiff.api` is imported, so each of those shared modules keeps one table and
this file holds everything the new kinds need. Kubernetes' own defaulters and validators
(pkg/apis/apps, batch, core, discovery) are the reference for every value.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from skiff.api import defaults, schema, tables, validation
from skiff.api.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from skiff.api.selectors import LabelSelector, validate_label_selector, validate_labels
from skiff.clock import parse_rfc3339

Obj = dict[str, Any]
VObj = Mapping[str, Any]  # what validators get (read only)

JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def _child(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _set_default(obj: Obj, key: str, value: Any) -> None:
    if obj.get(key) is None:
        obj[key] = value


def _template_spec(obj: Obj) -> Obj:
    return _child(_child(_child(obj, "spec"), "template"), "spec")


# -- defaults ---------------------------------------------------------------------------


def _default_deployment(obj: Obj) -> None:
    spec = _child(obj, "spec")
    _set_default(spec, "replicas", 1)
    strategy = _child(spec, "strategy")
    _set_default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        _set_default(rolling, "maxUnavailable", "25%")
        _set_default(rolling, "maxSurge", "25%")
    _set_default(spec, "revisionHistoryLimit", 10)
    _set_default(spec, "progressDeadlineSeconds", 600)
    defaults.default_pod_spec(_template_spec(obj))


def _default_daemon_set(obj: Obj) -> None:
    spec = _child(obj, "spec")
    strategy = _child(spec, "updateStrategy")
    _set_default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        _set_default(rolling, "maxUnavailable", 1)
        _set_default(rolling, "maxSurge", 0)
    _set_default(spec, "revisionHistoryLimit", 10)
    defaults.default_pod_spec(_template_spec(obj))


def _default_job(obj: Obj) -> None:
    spec = _child(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    _set_default(spec, "parallelism", 1)
    # With a per-index limit the Job-wide one is unbounded unless set (as Kubernetes).
    _set_default(spec, "backoffLimit",
                 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    _set_default(spec, "completionMode", "NonIndexed")
    _set_default(spec, "suspend", False)
    _set_default(spec, "podReplacementPolicy",
                 "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    _set_default(spec, "manualSelector", None)
    if spec.get("manualSelector") is None:
        spec.pop("manualSelector", None)
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if isinstance(rule, dict):
            for pattern in rule.get("onPodConditions") or []:
                if isinstance(pattern, dict):
                    _set_default(pattern, "status", "True")
    # The selector Kubernetes generates (batch/v1 `generateSelector`): the job's uid.
    uid = obj.get("metadata", {}).get("uid")
    name = obj.get("metadata", {}).get("name")
    template = _child(spec, "template")
    labels = _child(_child(template, "metadata"), "labels")
    if uid and not spec.get("manualSelector"):
        labels.setdefault(JOB_CONTROLLER_UID_LABEL, uid)
        labels.setdefault("controller-uid", uid)
        if name:
            labels.setdefault(JOB_NAME_LABEL, name)
            labels.setdefault("job-name", name)
        if spec.get("selector") is None:
            spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID_LABEL: uid}}
    tspec = _template_spec(obj)
    restart = tspec.get("restartPolicy")
    defaults.default_pod_spec(tspec)
    if restart is None:
        tspec.pop("restartPolicy", None)  # a Job's template must choose: validation says so


def _default_service(obj: Obj) -> None:
    spec = _child(obj, "spec")
    _set_default(spec, "type", "ClusterIP")
    _set_default(spec, "sessionAffinity", "None")
    _set_default(spec, "internalTrafficPolicy", "Cluster")
    _set_default(spec, "ipFamilyPolicy", "SingleStack")
    _set_default(spec, "ipFamilies", ["IPv4"])
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            _set_default(port, "protocol", "TCP")
            if port.get("targetPort") is None and port.get("port") is not None:
                port["targetPort"] = port["port"]
    _child(obj, "status").setdefault("loadBalancer", {})


def _default_secret(obj: Obj) -> None:
    _set_default(obj, "type", "Opaque")
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = _child(obj, "data")
        for key, value in string_data.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()


def _default_endpoint_slice(obj: Obj) -> None:
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            _set_default(port, "protocol", "TCP")


def _default_endpoints(obj: Obj) -> None:
    for subset in obj.get("subsets") or []:
        if isinstance(subset, dict):
            _default_endpoint_slice(subset)


# -- validation -------------------------------------------------------------------------

_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def _data_keys(data: Any, path: str) -> list[FieldError]:
    if data is None:
        return []
    if not isinstance(data, dict):
        return [invalid(path, data, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    for key, value in data.items():
        if not isinstance(key, str) or not _KEY_RE.match(key) or len(key) > 253 or key in (
                ".", ".."):
            errors.append(invalid(path, key, "a valid config key must consist of alphanumeric "
                                             "characters, '-', '_' or '.'"))
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "must be a string"))
    return errors


def _validate_config_map(obj: VObj, old: VObj | None) -> list[FieldError]:
    errors = _data_keys(obj.get("data"), "data")
    errors += _data_keys(obj.get("binaryData"), "binaryData")
    if old is not None and old.get("immutable") and (
            obj.get("data") != old.get("data") or obj.get("binaryData") != old.get(
                "binaryData")):
        errors.append(forbidden("data", "field is immutable when `immutable` is set"))
    return errors


def _validate_secret(obj: VObj, old: VObj | None) -> list[FieldError]:
    errors = _data_keys(obj.get("data"), "data")  # base64: skiff.api.bytesfields
    if old is not None and old.get("type") != obj.get("type"):
        errors += validation._immutable(obj.get("type"), old.get("type"), "type")
    if old is not None and old.get("immutable") and obj.get("data") != old.get("data"):
        errors.append(forbidden("data", "field is immutable when `immutable` is set"))
    return errors


def _validate_deployment(obj: VObj, old: VObj | None) -> list[FieldError]:
    spec, errors = validation._dict(obj.get("spec"), "spec")
    errors += validation._validate_workload_template(spec)
    errors += validation._int(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit",
                              minimum=0)
    errors += validation._int(spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds",
                              minimum=1)
    deadline, min_ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds")
    if isinstance(deadline, int) and isinstance(min_ready, int) and deadline <= min_ready:
        errors.append(invalid("spec.progressDeadlineSeconds", deadline,
                              "must be greater than minReadySeconds"))
    strategy, errs = validation._dict(spec.get("strategy"), "spec.strategy")
    errors += errs
    errors += validation._enum(strategy, "type", "spec.strategy.type",
                               ["Recreate", "RollingUpdate"])
    if strategy.get("type") == "Recreate" and strategy.get("rollingUpdate") is not None:
        errors.append(forbidden("spec.strategy.rollingUpdate",
                                           "may not be specified when strategy `type` is "
                                           "'Recreate'"))
    rolling, errs = validation._dict(strategy.get("rollingUpdate"),
                                     "spec.strategy.rollingUpdate")
    errors += errs
    surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
    for key, value in (("maxSurge", surge), ("maxUnavailable", unavailable)):
        if value is not None:
            errors += validation._int_or_percent(value, f"spec.strategy.rollingUpdate.{key}")
    if strategy.get("type") == "RollingUpdate" and surge in (0, "0%") and \
            unavailable in (0, "0%"):
        errors.append(invalid("spec.strategy.rollingUpdate.maxUnavailable", unavailable,
                              "may not be 0 when `maxSurge` is 0"))
    if old is not None:
        errors += validation._immutable(spec.get("selector"),
                                        (old.get("spec") or {}).get("selector"),
                                        "spec.selector")
    return errors


def _validate_daemon_set(obj: VObj, old: VObj | None) -> list[FieldError]:
    spec, errors = validation._dict(obj.get("spec"), "spec")
    errors += validation._validate_workload_template(spec)
    strategy, errs = validation._dict(spec.get("updateStrategy"), "spec.updateStrategy")
    errors += errs
    errors += validation._enum(strategy, "type", "spec.updateStrategy.type",
                               ["RollingUpdate", "OnDelete"])
    if old is not None:
        errors += validation._immutable(spec.get("selector"),
                                        (old.get("spec") or {}).get("selector"),
                                        "spec.selector")
    return errors


def validate_job_spec(obj: VObj) -> list[FieldError]:
    """A Job's spec rules, for a CronJob's jobTemplate too."""
    return _validate_job(obj, None)


def _validate_job(obj: VObj, old: VObj | None) -> list[FieldError]:
    spec, errors = validation._dict(obj.get("spec"), "spec")
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        errors += validation._int(spec, key, f"spec.{key}", minimum=0)
    errors += validation._int(spec, "activeDeadlineSeconds", "spec.activeDeadlineSeconds",
                              minimum=1)
    errors += validation._enum(spec, "completionMode", "spec.completionMode",
                               ["NonIndexed", "Indexed"])
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errors.append(required("spec.completions"))
    selector = spec.get("selector")
    if selector is None:
        errors.append(required("spec.selector"))
    else:
        errors += validate_label_selector(selector, "spec.selector")
    template, errs = validation._dict(spec.get("template"), "spec.template")
    errors += errs
    labels = (template.get("metadata") or {}).get("labels") or {}
    if isinstance(selector, dict) and not validate_label_selector(selector, "spec.selector"):
        parsed = LabelSelector.from_dict(selector, path="spec.selector")
        if not parsed.matches(labels if isinstance(labels, dict) else {}):
            errors.append(invalid("spec.template.metadata.labels", labels,
                                  "`selector` does not match template `labels`"))
    errors += validation.validate_pod_spec(template.get("spec"), "spec.template.spec")
    tspec, _ = validation._dict(template.get("spec"), "spec.template.spec")
    restart = tspec.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        errors.append(required("spec.template.spec.restartPolicy") if restart is None else
                      not_supported("spec.template.spec.restartPolicy", restart,
                                    ["OnFailure", "Never"]))
    policy, errs = validation._dict(spec.get("podFailurePolicy"), "spec.podFailurePolicy")
    errors += errs
    if policy and restart != "Never":
        errors.append(invalid("spec.template.spec.restartPolicy", restart,
                              "only \"Never\" is supported when podFailurePolicy is specified"))
    for i, rule in enumerate(policy.get("rules") or []):
        rpath = f"spec.podFailurePolicy.rules[{i}]"
        rule_obj, errs = validation._dict(rule, rpath)
        errors += errs
        errors += validation._enum(rule_obj, "action", f"{rpath}.action",
                                   ["Count", "FailIndex", "FailJob", "Ignore"],
                                   is_required=True)
        if bool(rule_obj.get("onExitCodes")) == bool(rule_obj.get("onPodConditions")):
            errors.append(invalid(rpath, "", "specifying one of onExitCodes and "
                                             "onPodConditions is required"))
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("selector", "completions", "completionMode", "podFailurePolicy"):
            if key == "completions" and spec.get("completions") != old_spec.get(
                    "completions") and spec.get("completionMode") == "Indexed" and \
                    spec.get("completions") == spec.get("parallelism"):
                continue  # elastic Indexed jobs may scale completions with parallelism
            errors += validation._immutable(spec.get(key), old_spec.get(key), f"spec.{key}")
        errors += validation._immutable(spec.get("template"), old_spec.get("template"),
                                        "spec.template")
    return errors


def _validate_service(obj: VObj, old: VObj | None) -> list[FieldError]:
    spec, errors = validation._dict(obj.get("spec"), "spec")
    errors += validation._enum(spec, "type", "spec.type",
                               ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"])
    errors += validation._enum(spec, "sessionAffinity", "spec.sessionAffinity",
                               ["None", "ClientIP"])
    ports, errs = validation._list(spec.get("ports"), "spec.ports")
    errors += errs
    if not ports and spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None":
        errors.append(required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        ppath = f"spec.ports[{i}]"
        port_obj, errs = validation._dict(port, ppath)
        errors += errs
        if len(ports) > 1 and not port_obj.get("name"):
            errors.append(required(f"{ppath}.name"))
        name = port_obj.get("name")
        if isinstance(name, str) and name:
            if name in names:
                errors.append(duplicate(f"{ppath}.name", name))
            names.add(name)
        if port_obj.get("port") is None:
            errors.append(required(f"{ppath}.port"))
        else:
            errors += validation._port(port_obj["port"], f"{ppath}.port", allow_name=False)
        if port_obj.get("targetPort") is not None:
            errors += validation._port(port_obj["targetPort"], f"{ppath}.targetPort",
                                       allow_name=True)
        errors += validation._enum(port_obj, "protocol", f"{ppath}.protocol",
                                   ["TCP", "UDP", "SCTP"])
    errors += _validate_node_ports(spec, ports)
    errors += validate_labels(spec.get("selector"), "spec.selector")
    return errors


def _validate_node_ports(spec: VObj, ports: list[Any]) -> list[FieldError]:
    """ValidateService's node port rules: none on a ClusterIP Service, and no node port
    twice for one protocol (the range and whether it is free are the allocator's)."""
    errors: list[FieldError] = []
    seen: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        number = port.get("nodePort") if isinstance(port, dict) else None
        if not isinstance(number, int) or isinstance(number, bool) or number == 0:
            continue
        path = f"spec.ports[{i}].nodePort"
        if (spec.get("type") or "ClusterIP") == "ClusterIP":
            errors.append(forbidden(path, "may not be used when `type` is 'ClusterIP'"))
        key = (str(port.get("protocol") or "TCP"), number)
        if key in seen:
            errors.append(duplicate(path, number))
        seen.add(key)
    return errors


def _validate_endpoint_slice(obj: VObj, old: VObj | None) -> list[FieldError]:
    errors = validation._enum(obj, "addressType", "addressType", ["IPv4", "IPv6", "FQDN"],
                              is_required=True)
    endpoints, errs = validation._list(obj.get("endpoints"), "endpoints")
    errors += errs
    for i, endpoint in enumerate(endpoints):
        ep, errs = validation._dict(endpoint, f"endpoints[{i}]")
        errors += errs
        addresses, errs = validation._list(ep.get("addresses"), f"endpoints[{i}].addresses")
        errors += errs
        if not addresses:
            errors.append(required(f"endpoints[{i}].addresses"))
    if old is not None:
        errors += validation._immutable(obj.get("addressType"), old.get("addressType"),
                                        "addressType")
    return errors


def _validate_endpoints(obj: VObj, old: VObj | None) -> list[FieldError]:
    """ValidateEndpoints: every address an IP, every port in range with a protocol, and
    the ports of a subset named when there are several."""
    subsets, errors = validation._list(obj.get("subsets"), "subsets")
    for i, raw in enumerate(subsets):
        subset, errs = validation._dict(raw, f"subsets[{i}]")
        errors += errs
        for field in ("addresses", "notReadyAddresses"):
            addresses, errs = validation._list(subset.get(field), f"subsets[{i}].{field}")
            errors += errs
            for j, raw_address in enumerate(addresses):
                path = f"subsets[{i}].{field}[{j}]"
                address, errs = validation._dict(raw_address, path)
                errors += errs
                ip = address.get("ip")
                if not ip:
                    errors.append(required(f"{path}.ip"))
                elif not _is_ip(ip):
                    errors.append(invalid(f"{path}.ip", ip, "must be a valid IP address"))
        ports, errs = validation._list(subset.get("ports"), f"subsets[{i}].ports")
        errors += errs
        for j, raw_port in enumerate(ports):
            path = f"subsets[{i}].ports[{j}]"
            port, errs = validation._dict(raw_port, path)
            errors += errs
            if port.get("port") is None:
                errors.append(required(f"{path}.port"))
            errors += validation._int(port, "port", f"{path}.port", minimum=1, maximum=65535)
            errors += validation._enum(port, "protocol", f"{path}.protocol",
                                       ["TCP", "UDP", "SCTP"], is_required=True)
            if len(ports) > 1 and not port.get("name"):
                errors.append(required(f"{path}.name"))
    return errors


def _is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def _validate_controller_revision(obj: VObj, old: VObj | None) -> list[FieldError]:
    errors = validation._int(obj, "revision", "revision", minimum=0)
    if old is not None:
        errors += validation._immutable(obj.get("data"), old.get("data"), "data")
    return errors


# -- known fields -----------------------------------------------------------------------

_TOP = ("apiVersion", "kind")
_CONDITIONS = schema.ListOf(schema.CONDITION)

_JOB_SPEC = schema.fields(
    "parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
    "backoffLimitPerIndex", "maxFailedIndexes", "manualSelector", "ttlSecondsAfterFinished",
    "completionMode", "suspend", "podReplacementPolicy", "managedBy", "successPolicy",
    "podFailurePolicy", selector=schema.LABEL_SELECTOR, template=schema.POD_TEMPLATE)

SCHEMAS: dict[str, schema.Fields] = {
    "Deployment": schema.fields(
        *_TOP, metadata=schema.OBJECT_META,
        spec=schema.fields(
            "replicas", "minReadySeconds", "revisionHistoryLimit", "paused",
            "progressDeadlineSeconds", selector=schema.LABEL_SELECTOR,
            template=schema.POD_TEMPLATE,
            strategy=schema.fields("type", rollingUpdate=schema.fields("maxUnavailable",
                                                                       "maxSurge"))),
        status=schema.fields("observedGeneration", "replicas", "updatedReplicas",
                             "readyReplicas", "availableReplicas", "unavailableReplicas",
                             "terminatingReplicas", "collisionCount", conditions=_CONDITIONS),
    ),
    "DaemonSet": schema.fields(
        *_TOP, metadata=schema.OBJECT_META,
        spec=schema.fields(
            "minReadySeconds", "revisionHistoryLimit", selector=schema.LABEL_SELECTOR,
            template=schema.POD_TEMPLATE,
            updateStrategy=schema.fields("type", rollingUpdate=schema.fields(
                "maxUnavailable", "maxSurge"))),
        status=schema.fields("currentNumberScheduled", "numberMisscheduled",
                             "desiredNumberScheduled", "numberReady", "observedGeneration",
                             "updatedNumberScheduled", "numberAvailable",
                             "numberUnavailable", "collisionCount", conditions=_CONDITIONS),
    ),
    "ControllerRevision": schema.fields(*_TOP, "data", "revision",
                                        metadata=schema.OBJECT_META),
    "Job": schema.fields(
        *_TOP, metadata=schema.OBJECT_META, spec=_JOB_SPEC,
        status=schema.fields("startTime", "completionTime", "active", "succeeded", "failed",
                             "terminating", "completedIndexes", "failedIndexes",
                             "uncountedTerminatedPods", "ready", conditions=_CONDITIONS),
    ),
    "Service": schema.fields(
        *_TOP, metadata=schema.OBJECT_META,
        spec=schema.fields(
            "selector", "clusterIP", "clusterIPs", "type", "externalIPs", "sessionAffinity",
            "loadBalancerIP", "loadBalancerSourceRanges", "externalName",
            "externalTrafficPolicy", "healthCheckNodePort", "publishNotReadyAddresses",
            "sessionAffinityConfig", "ipFamilies", "ipFamilyPolicy",
            "allocateLoadBalancerNodePorts", "loadBalancerClass", "internalTrafficPolicy",
            "trafficDistribution",
            ports=schema.ListOf(schema.fields("name", "protocol", "appProtocol", "port",
                                              "targetPort", "nodePort"))),
        status=schema.fields("loadBalancer", conditions=_CONDITIONS),
    ),
    "EndpointSlice": schema.fields(
        *_TOP, "addressType", "endpoints", "ports", metadata=schema.OBJECT_META),
    "Endpoints": schema.fields(*_TOP, metadata=schema.OBJECT_META, subsets=schema.ListOf(
        schema.fields("addresses", "notReadyAddresses", "ports"))),
    "ConfigMap": schema.fields(*_TOP, "data", "binaryData", "immutable",
                               metadata=schema.OBJECT_META),
    "Secret": schema.fields(*_TOP, "data", "stringData", "type", "immutable",
                            metadata=schema.OBJECT_META),
    "CronJob": schema.fields(
        *_TOP, metadata=schema.OBJECT_META,
        spec=schema.fields(
            "schedule", "timeZone", "startingDeadlineSeconds", "concurrencyPolicy", "suspend",
            "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
            jobTemplate=schema.fields(metadata=schema.OBJECT_META, spec=_JOB_SPEC)),
        status=schema.fields("active", "lastScheduleTime", "lastSuccessfulTime")),
}


# -- table columns (kubectl's printers) ----------------------------------------------------


def _spec(o: Obj) -> Obj:
    return dict(o.get("spec") or {})


def _status(o: Obj) -> Obj:
    return dict(o.get("status") or {})


def _selector_text(selector: Any) -> str:
    if not isinstance(selector, dict) or not selector:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def job_status_word(job: Obj) -> str:
    """kubectl 1.32's Job STATUS column."""
    conditions = {c.get("type"): c.get("status") for c in _status(job).get("conditions") or []}
    for cond in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if conditions.get(cond) == "True":
            return {"FailureTarget": "FailureTarget",
                    "SuccessCriteriaMet": "SuccessCriteriaMet"}.get(cond, cond)
    if job.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    return "Running"


def _job_duration(job: Obj) -> str:
    status = _status(job)
    start = status.get("startTime")
    if not start:
        return ""
    end = status.get("completionTime")
    return tables.age(start, now=parse_rfc3339(end) if end else None)


def _service_ports(svc: Obj) -> str:
    parts = []
    for p in _spec(svc).get("ports") or []:
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        parts.append(f"{text}/{p.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


def _slice_ports(es: Obj) -> str:
    ports = [str(p.get("port")) for p in es.get("ports") or [] if p.get("port") is not None]
    return ",".join(ports) or "<unset>"


def _slice_endpoints(es: Obj) -> str:
    addresses = [a for e in es.get("endpoints") or [] for a in e.get("addresses") or []]
    if not addresses:
        return "<none>"
    shown = ",".join(addresses[:3])
    return shown + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")


def _endpoints_column(ep: Obj) -> str:
    """kubectl's formatEndpoints: `ip:port` for each ready address and port, three at most."""
    shown: list[str] = []
    total = 0
    for subset in ep.get("subsets") or []:
        ports = [p.get("port") for p in subset.get("ports") or []]
        for address in subset.get("addresses") or []:
            for port in ports or [None]:
                total += 1
                if len(shown) < 3:
                    ip = address.get("ip", "")
                    shown.append(ip if port is None else f"{ip}:{port}")
    if not shown:
        return "<none>"
    return ",".join(shown) + (f" + {total - 3} more..." if total > 3 else "")


def _controller_of(o: Obj) -> str:
    for ref in o.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).partition("/")[0]
            return f"{ref.get('kind', '').lower()}.{group}/{ref.get('name')}"
    return "<none>"


COLUMNS: dict[str, list[tables.Column]] = {
    "Deployment": [
        ("NAME", tables._meta("name")),
        ("READY", lambda o: f"{_status(o).get('readyReplicas', 0)}/{_spec(o).get('replicas', 0)}"),
        ("UP-TO-DATE", lambda o: str(_status(o).get("updatedReplicas", 0))),
        ("AVAILABLE", lambda o: str(_status(o).get("availableReplicas", 0))),
        ("AGE", tables._age)],
    "DaemonSet": [
        ("NAME", tables._meta("name")),
        ("DESIRED", lambda o: str(_status(o).get("desiredNumberScheduled", 0))),
        ("CURRENT", lambda o: str(_status(o).get("currentNumberScheduled", 0))),
        ("READY", lambda o: str(_status(o).get("numberReady", 0))),
        ("UP-TO-DATE", lambda o: str(_status(o).get("updatedNumberScheduled", 0))),
        ("AVAILABLE", lambda o: str(_status(o).get("numberAvailable", 0))),
        ("NODE SELECTOR", lambda o: _selector_text(
            ((_spec(o).get("template") or {}).get("spec") or {}).get("nodeSelector"))),
        ("AGE", tables._age)],
    "ControllerRevision": [
        ("NAME", tables._meta("name")), ("CONTROLLER", _controller_of),
        ("REVISION", lambda o: str(o.get("revision", 0))), ("AGE", tables._age)],
    "Job": [
        ("NAME", tables._meta("name")), ("STATUS", job_status_word),
        ("COMPLETIONS", lambda o: f"{_status(o).get('succeeded', 0)}/"
                                  f"{_spec(o).get('completions', 1)}"
         if _spec(o).get("completions") is not None
         else f"{_status(o).get('succeeded', 0)}/1 of {_spec(o).get('parallelism', 1)}"),
        ("DURATION", _job_duration), ("AGE", tables._age)],
    "Service": [
        ("NAME", tables._meta("name")),
        ("TYPE", lambda o: str(_spec(o).get("type", "ClusterIP"))),
        ("CLUSTER-IP", lambda o: str(_spec(o).get("clusterIP") or "<none>")),
        ("EXTERNAL-IP", lambda o: ",".join(_spec(o).get("externalIPs") or []) or "<none>"),
        ("PORT(S)", _service_ports), ("AGE", tables._age)],
    "EndpointSlice": [
        ("NAME", tables._meta("name")),
        ("ADDRESSTYPE", lambda o: str(o.get("addressType", ""))),
        ("PORTS", _slice_ports), ("ENDPOINTS", _slice_endpoints), ("AGE", tables._age)],
    "Endpoints": [
        ("NAME", tables._meta("name")), ("ENDPOINTS", _endpoints_column),
        ("AGE", tables._age)],
    "ConfigMap": [
        ("NAME", tables._meta("name")),
        ("DATA", lambda o: str(len(o.get("data") or {}) + len(o.get("binaryData") or {}))),
        ("AGE", tables._age)],
    "Secret": [
        ("NAME", tables._meta("name")), ("TYPE", lambda o: str(o.get("type", "Opaque"))),
        ("DATA", lambda o: str(len(o.get("data") or {}))), ("AGE", tables._age)],
}

WIDE: dict[str, list[tables.Column]] = {
    "Deployment": [
        ("CONTAINERS", lambda o: ",".join(
            c.get("name", "") for c in ((_spec(o).get("template") or {}).get("spec") or {})
            .get("containers") or [])),
        ("IMAGES", lambda o: ",".join(
            c.get("image", "") for c in ((_spec(o).get("template") or {}).get("spec") or {})
            .get("containers") or [])),
        ("SELECTOR", lambda o: _selector_text((_spec(o).get("selector") or {}).get(
            "matchLabels")))],
    "Service": [("SELECTOR", lambda o: _selector_text(_spec(o).get("selector")))],
    # kubectl 1.32's -o wide columns of the other workloads (printers.go)
    "ReplicaSet": [("CONTAINERS", lambda o: _template_containers(o, "name")),
                   ("IMAGES", lambda o: _template_containers(o, "image")),
                   ("SELECTOR", lambda o: _label_selector_text(_spec(o).get("selector")))],
    "ReplicationController": [
        ("CONTAINERS", lambda o: _template_containers(o, "name")),
        ("IMAGES", lambda o: _template_containers(o, "image")),
        ("SELECTOR", lambda o: _selector_text(_spec(o).get("selector")))],
    "StatefulSet": [("CONTAINERS", lambda o: _template_containers(o, "name")),
                    ("IMAGES", lambda o: _template_containers(o, "image"))],
    "DaemonSet": [("CONTAINERS", lambda o: _template_containers(o, "name")),
                  ("IMAGES", lambda o: _template_containers(o, "image")),
                  ("SELECTOR", lambda o: _label_selector_text(_spec(o).get("selector")))],
    "Job": [("CONTAINERS", lambda o: _template_containers(o, "name")),
            ("IMAGES", lambda o: _template_containers(o, "image")),
            ("SELECTOR", lambda o: _label_selector_text(_spec(o).get("selector")))],
}


def _template_containers(o: Obj, field: str) -> str:
    template = (_spec(o).get("template") or {}).get("spec") or {}
    return ",".join(str(c.get(field, "")) for c in template.get("containers") or [])


def _label_selector_text(selector: Any) -> str:
    """metav1.FormatLabelSelector: `a=b,c in (d,e),!f`; `<none>` when it selects nothing."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for req in selector.get("matchExpressions") or []:
        key, op = req.get("key", ""), req.get("operator", "")
        values = ",".join(sorted(req.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}.get(op, key))
    return ",".join(parts) or "<none>"


def register() -> None:
    """Add the kinds' rows to the shared per-kind tables (idempotent)."""
    defaulters: dict[str, Callable[[Obj], None]] = {
        "Deployment": _default_deployment, "DaemonSet": _default_daemon_set,
        "Job": _default_job, "Service": _default_service, "Secret": _default_secret,
        "EndpointSlice": _default_endpoint_slice, "Endpoints": _default_endpoints,
    }
    validators: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None],
                                   list[FieldError]]] = {
        "Deployment": _validate_deployment, "DaemonSet": _validate_daemon_set,
        "Job": _validate_job, "Service": _validate_service,
        "EndpointSlice": _validate_endpoint_slice, "Endpoints": _validate_endpoints,
        "ConfigMap": _validate_config_map,
        "Secret": _validate_secret, "ControllerRevision": _validate_controller_revision,
    }
    defaults._DEFAULTERS.update(defaulters)
    validation._VALIDATORS.update(validators)
    schema.SCHEMAS.update(SCHEMAS)
    tables.COLUMNS.update(COLUMNS)
    tables.WIDE.update(WIDE)
