"""The Pod (core/v1): its defaults, create and update validation (ValidatePodUpdate and the
ephemeralcontainers subresource), kubectl's columns and status words, and its known fields.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api.columns import age, age_column, condition, meta
from skiff.api.errors import (
    FieldError,
    forbidden,
    go_value,
    invalid,
    not_found,
)
from skiff.api.fieldchecks import as_dict, as_list, enum_field, is_int
from skiff.api.fielddefaults import child, set_default
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.podspec import validate_container, validate_pod_spec
from skiff.api.groups.core.podtemplate import POD_SPEC, POD_STATUS, default_pod_spec
from skiff.api.types import Obj, ObjView

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it "
    "to be set to 1 if it was previously negative),`spec.schedulingGates` (only removals)"
)


def _validate_pod_update(obj: ObjView, old: ObjView) -> list[FieldError]:
    """`ValidatePodUpdate`: the spec is immutable except for a few fields."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    old_spec, _ = as_dict(old.get("spec"), "spec")
    munged = copy.deepcopy(dict(spec))
    for key in ("containers", "initContainers"):
        new_list, old_list = munged.get(key), old_spec.get(key)
        if isinstance(new_list, list) and isinstance(old_list, list) and (
                len(new_list) == len(old_list)):
            for new_c, old_c in zip(new_list, old_list, strict=True):
                if isinstance(new_c, dict) and isinstance(old_c, Mapping):
                    if old_c.get("image") is None:
                        new_c.pop("image", None)
                    else:
                        new_c["image"] = old_c["image"]

    new_deadline, old_deadline = spec.get("activeDeadlineSeconds"), old_spec.get(
        "activeDeadlineSeconds")
    if old_deadline is not None and new_deadline is None:
        errors.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                              "must not update from a positive integer to nil value"))
    elif (is_int(old_deadline) and is_int(new_deadline)
          and new_deadline > old_deadline):
        errors.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                              "must be less than or equal to previous value"))
    _set_or_drop(munged, "activeDeadlineSeconds", old_spec)

    new_tolerations = spec.get("tolerations") or []
    for old_t in old_spec.get("tolerations") or []:
        if not any(_same_toleration(old_t, t) for t in new_tolerations):
            # Kubernetes' words, once for the first toleration missing
            errors.append(forbidden("spec.tolerations",
                                    "existing toleration can not be modified except its "
                                    "tolerationSeconds"))
            break
    _set_or_drop(munged, "tolerations", old_spec)

    old_gates = {g.get("name") for g in old_spec.get("schedulingGates") or []
                 if isinstance(g, Mapping)}
    for gate in spec.get("schedulingGates") or []:
        name = gate.get("name") if isinstance(gate, Mapping) else gate
        if not isinstance(name, str) or name not in old_gates:
            errors.append(forbidden("spec.schedulingGates",
                                    f"only deletion is allowed, but found new scheduling gate "
                                    f"{name!r}"))
    _set_or_drop(munged, "schedulingGates", old_spec)

    new_grace, old_grace = spec.get("terminationGracePeriodSeconds"), old_spec.get(
        "terminationGracePeriodSeconds")
    if is_int(old_grace) and old_grace < 0 and new_grace == 1:
        _set_or_drop(munged, "terminationGracePeriodSeconds", old_spec)

    if munged != dict(old_spec):
        changed = sorted(k for k in set(munged) | set(old_spec)
                         if munged.get(k) != old_spec.get(k))
        errors.append(forbidden("spec", POD_UPDATE_FORBIDDEN + "; changed: " +
                                ", ".join(f"spec.{k}" for k in changed)))
    return errors


def _set_or_drop(munged: dict[str, Any], key: str, old_spec: ObjView) -> None:
    if key in old_spec:
        munged[key] = copy.deepcopy(old_spec[key])
    else:
        munged.pop(key, None)


def _same_toleration(old: Any, new: Any) -> bool:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return bool(old == new)
    fields = ("key", "operator", "value", "effect")
    return all((old.get(f) or "") == (new.get(f) or "") for f in fields)


# What an ephemeral container may not have (validateEphemeralContainers): it is never
# restarted, probed, given resources or exposed.
_EPHEMERAL_FORBIDDEN = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe",
                        "ports", "resizePolicy", "restartPolicy")


def validate_ephemeral_containers_update(obj: ObjView, old: ObjView) -> list[FieldError]:
    """`ValidatePodEphemeralContainersUpdate` (the `pods/ephemeralcontainers` subresource):
    ephemeral containers may be added, never changed or removed; each new one is a
    container without ports, probes, lifecycle or resources whose name no other container
    of the pod has, and whose `targetContainerName` names one of the pod's containers."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    old_spec, _ = as_dict(old.get("spec"), "spec")
    items, errs = as_list(spec.get("ephemeralContainers"), "spec.ephemeralContainers")
    errors += errs
    before = {str(c.get("name")): c for c in old_spec.get("ephemeralContainers") or []
              if isinstance(c, Mapping)}
    now = {str(c.get("name")): c for c in items if isinstance(c, Mapping)}
    for name in before:
        if name not in now:
            errors.append(forbidden("spec.ephemeralContainers",
                                    f"existing ephemeral containers {go_value(name)} may not "
                                    "be removed"))
    targets = {str(c.get("name")) for key in ("containers", "initContainers")
               for c in old_spec.get(key) or [] if isinstance(c, Mapping)}
    names = set(targets)
    volume_names = {str(v.get("name")) for v in old_spec.get("volumes") or []
                    if isinstance(v, Mapping)}
    for i, item in enumerate(items):
        path = f"spec.ephemeralContainers[{i}]"
        known = str(item.get("name")) if isinstance(item, Mapping) else None
        if known is not None and known in before:
            if item != before[known]:
                errors.append(forbidden("spec.ephemeralContainers",
                                        f"existing ephemeral containers {go_value(known)} may "
                                        "not be changed"))
            names.add(known)
            continue
        errors += validate_container(item, path, names, volume_names, None, init=False)
        if not isinstance(item, Mapping):
            continue
        for key in _EPHEMERAL_FORBIDDEN:
            if item.get(key) not in (None, [], {}):
                errors.append(forbidden(f"{path}.{key}",
                                        "cannot be set for an Ephemeral Container"))
        if (item.get("resources") or {}) not in ({}, {"limits": {}, "requests": {}}):
            errors.append(forbidden(f"{path}.resources",
                                    "cannot be set for an Ephemeral Container"))
        target = item.get("targetContainerName")
        if target and (not isinstance(target, str) or target not in targets):
            errors.append(not_found(f"{path}.targetContainerName", target))
    return errors


def _validate_pod(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors = validate_pod_spec(obj.get("spec"), "spec")
    spec = obj.get("spec")
    if old is None and isinstance(spec, Mapping) and spec.get("ephemeralContainers"):
        errors.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    status, errs = as_dict(obj.get("status"), "status")
    errors += errs
    errors += enum_field(status, "phase", "status.phase",
                         ["Pending", "Running", "Succeeded", "Failed", "Unknown"])
    if old is not None:
        errors += _validate_pod_update(obj, old)
    return errors


def _default_pod(obj: Obj) -> None:
    default_pod_spec(child(obj, "spec"), pod=True)
    if obj.get("status") is None:
        obj["status"] = {"phase": "Pending"}
    elif isinstance(obj["status"], dict):
        set_default(obj["status"], "phase", "Pending")


def pod_status(pod: Obj) -> str:
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase") or "Pending"
    scheduled = condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False" and scheduled.get(
            "reason") == "SchedulingGated":
        reason = "SchedulingGated"
    init_specs = pod.get("spec", {}).get("initContainers") or []
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state", {})
        term, waiting = state.get("terminated"), state.get("waiting")
        is_sidecar = i < len(init_specs) and init_specs[i].get("restartPolicy") == "Always"
        if term and term.get("exitCode") == 0:
            continue
        if is_sidecar and cs.get("started"):
            continue
        if term:
            reason = "Init:" + (term.get("reason") or (
                f"Signal:{term['signal']}" if term.get("signal")
                else f"ExitCode:{term.get('exitCode')}"))
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state", {})
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term:
                reason = (f"Signal:{term['signal']}" if term.get("signal")
                          else f"ExitCode:{term.get('exitCode')}")
            elif state.get("running") and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            ready = condition(pod, "Ready")
            reason = "Running" if ready and ready.get("status") == "True" else "NotReady"
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return str(reason)


def pod_ready(pod: Obj) -> str:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    total = len(pod.get("spec", {}).get("containers") or [])
    return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"


def pod_restarts(pod: Obj, *, now: float | None = None) -> str:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    count = sum(int(c.get("restartCount", 0)) for c in statuses)
    last = max((c.get("lastState", {}).get("terminated", {}).get("finishedAt") or ""
                for c in statuses), default="")
    return f"{count} ({age(last, now=now)} ago)" if count and last else str(count)


def _gates(o: Obj) -> str:
    gates = o.get("spec", {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    ok = sum(1 for g in gates if (condition(o, g.get("conditionType", "")) or {}).get(
        "status") == "True")
    return f"{ok}/{len(gates)}"


RULES = GroupRules(
    defaulters={"Pod": _default_pod},
    validators={"Pod": _validate_pod},
    columns={
        "Pod": [("NAME", meta("name")), ("READY", pod_ready), ("STATUS", pod_status),
                ("RESTARTS", pod_restarts), ("AGE", age_column)],
    },
    wide={
        "Pod": [("IP", lambda o: str(o.get("status", {}).get("podIP", "<none>") or "<none>")),
                ("NODE", lambda o: str(o.get("spec", {}).get("nodeName") or "<none>")),
                ("NOMINATED NODE",
                 lambda o: str(o.get("status", {}).get("nominatedNodeName") or "<none>")),
                ("READINESS GATES", _gates)],
    },
    schemas={
        "Pod": fields(*TOP, metadata=OBJECT_META, spec=POD_SPEC, status=POD_STATUS),
    },
)
