"""What the DaemonSet controller decides, as pure functions (pkg/controller/daemon/util).

Daemon pods carry the tolerations Kubernetes adds (`AddOrUpdateDaemonPodTolerations`):
not-ready and unreachable NoExecute with no tolerationSeconds (they stay on a silent node
forever), and the NoSchedule pressure / unschedulable taints. A node is eligible when the
template's nodeSelector and required node affinity match it and every NoSchedule/NoExecute
taint is tolerated. Each pod is pinned to its node by a required node affinity on the
node's name (`metadata.name` matchField), and the scheduler binds it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api.names import object_hash
from skiff.api.types import Obj
from skiff.api.wellknown import (
    TAINT_DISK_PRESSURE,
    TAINT_MEMORY_PRESSURE,
    TAINT_NETWORK_UNAVAILABLE,
    TAINT_NOT_READY,
    TAINT_PID_PRESSURE,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
)
from skiff.controller_manager.podutil import taints_of, tolerates

REVISION_HASH_LABEL = "controller-revision-hash"

DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
    {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
    {"key": TAINT_DISK_PRESSURE, "operator": "Exists", "effect": "NoSchedule"},
    {"key": TAINT_MEMORY_PRESSURE, "operator": "Exists", "effect": "NoSchedule"},
    {"key": TAINT_PID_PRESSURE, "operator": "Exists", "effect": "NoSchedule"},
    {"key": TAINT_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
)
_HOST_NETWORK_TOLERATION = {"key": TAINT_NETWORK_UNAVAILABLE,
                            "operator": "Exists", "effect": "NoSchedule"}


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[Obj]:
    """The template's tolerations plus the daemon ones (replacing same key and effect)."""
    extra = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        extra.append(_HOST_NETWORK_TOLERATION)
    keys = {(t["key"], t["effect"]) for t in extra}
    own = [dict(t) for t in pod_spec.get("tolerations") or []
           if (t.get("key"), t.get("effect")) not in keys]
    return own + [dict(t) for t in extra]


def template_hash(template: Obj) -> str:
    return object_hash(template)


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            number, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return number > bound if op == "Gt" else number < bound
    return False


def node_eligible(template_spec: Mapping[str, Any], node: Mapping[str, Any], *,
                  running: bool = False) -> bool:
    """`NodeShouldRunDaemonPod`: selector, required node affinity, tolerated taints. A new
    pod needs every NoSchedule and NoExecute taint tolerated; a `running` one only the
    NoExecute ones (`shouldContinueRunning`: an unreachable node's NoSchedule taint does
    not remove the pod it already has)."""
    labels = node.get("metadata", {}).get("labels") or {}
    name = node.get("metadata", {}).get("name")
    selector = template_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    required = (((template_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
            (term.get("matchExpressions") or term.get("matchFields"))
            and all(_expression_holds(e, labels) for e in term.get("matchExpressions") or [])
            and all(_expression_holds(e, {"metadata.name": str(name)})
                    for e in term.get("matchFields") or [])
            for term in terms):
        return False
    tolerations = daemon_tolerations(template_spec)
    effects = ("NoExecute",) if running else ("NoSchedule", "NoExecute")
    return all(any(tolerates(t, taint) for t in tolerations) for taint in taints_of(node)
               if taint.get("effect") in effects)


def pin_to_node(pod_spec: Obj, node_name: str) -> None:
    """`ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity names the node."""
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In",
                          "values": [node_name]}]}]}


def node_of(pod: Mapping[str, Any]) -> str | None:
    """The node a daemon pod is for: bound, or named by its pinning affinity."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return None


def daemon_pod_template(ds: Mapping[str, Any], node_name: str, pod_hash: str) -> Obj:
    template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
    spec = template.setdefault("spec", {})
    spec["tolerations"] = daemon_tolerations(spec)
    pin_to_node(spec, node_name)
    template.setdefault("metadata", {}).setdefault("labels", {})[REVISION_HASH_LABEL] = pod_hash
    return template
