"""What an object uses of a ResourceQuota (its validation and columns: groups.core).

The apiserver's quota admission and the controller-manager's resourcequota controller must
count the same way, so the evaluators live here (pkg/quota/v1/evaluator/core): a pod that
is not terminal (nor past its deletion grace) uses `pods`, `count/pods` and the sums of its
containers' requests and limits (`requests.cpu`, `limits.memory`, … and the `cpu`/`memory`
aliases of requests; an init container counts when it asks more than all the containers
together); a claim uses `persistentvolumeclaims` and `requests.storage`; any other counted
object uses `count/<resource>[.<group>]` and, for core kinds, its plain name (`services`,
`configmaps`, `secrets`); a NodePort or LoadBalancer Service also uses `services.nodeports`
(one per port) and a LoadBalancer `services.loadbalancers`. Scopes (`Terminating`,
`NotTerminating`, `BestEffort`, `NotBestEffort`, and `PriorityClass` through
`scopeSelector`) narrow which pods a quota sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from skiff.api.kinds import KindInfo
from skiff.api.quantity import canonical, parse_quantity
from skiff.api.resources import binary_amounts, pod_amounts
from skiff.clock import parse_rfc3339

Usage = dict[str, Fraction]

SCOPES = ["BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating",
          "PriorityClass", "Terminating"]
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
# core kinds whose plain resource name is also a quota resource (`services: "10"`)
_PLAIN_COUNTS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps",
                 "Secret": "secrets", "PersistentVolumeClaim": "persistentvolumeclaims",
                 "ResourceQuota": "resourcequotas"}
# the kinds quota counts (count/<resource>[.<group>]); everything the controller watches
COUNTED_KINDS = ("Pod", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim",
                 "ServiceAccount", "ReplicaSet", "ReplicationController", "Deployment",
                 "StatefulSet", "DaemonSet",
                 "Job", "CronJob", "Ingress", "NetworkPolicy")


def count_name(info: KindInfo) -> str:
    return f"count/{info.resource}" + (f".{info.group}" if info.group else "")


def pod_counts(pod: Mapping[str, Any], now: float) -> bool:
    """QuotaV1Pod: terminal pods, and pods past their deletion grace, use nothing."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        return now <= parse_rfc3339(str(deleted)) + float(grace)
    return True


def is_best_effort(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return not any((c.get("resources") or {}).get(part)
                   for field in ("containers", "initContainers")
                   for c in spec.get(field) or [] for part in ("requests", "limits"))


def usage(info: KindInfo, obj: Mapping[str, Any], now: float) -> Usage:
    """What one object uses of any quota (empty when it uses nothing)."""
    if info.kind == "Pod" and not pod_counts(obj, now):
        return {}
    used: Usage = {count_name(info): Fraction(1)}
    if info.kind in _PLAIN_COUNTS:
        used[_PLAIN_COUNTS[info.kind]] = Fraction(1)
    spec = obj.get("spec") or {}
    if info.kind == "Pod":
        for name, amount in pod_amounts(spec, "requests").items():
            used[f"requests.{name}"] = amount
            if name in _COMPUTE:
                used[name] = amount
        for name, amount in pod_amounts(spec, "limits").items():
            used[f"limits.{name}"] = amount
    elif info.kind == "Service":
        used.update(_service_usage(spec))
    elif info.kind == "PersistentVolumeClaim":
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if storage is not None:
            used["requests.storage"] = parse_quantity(storage)
    return used


def _service_usage(spec: Mapping[str, Any]) -> Usage:
    """The service evaluator: a NodePort Service uses a node port per port, a LoadBalancer
    one too (only the ports naming one when it asks for no node ports) and a load
    balancer."""
    ports = [p for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    if spec.get("type") == "NodePort":
        return {"services.nodeports": Fraction(len(ports))}
    if spec.get("type") != "LoadBalancer":
        return {}
    node_ports = (sum(1 for p in ports if p.get("nodePort"))
                  if spec.get("allocateLoadBalancerNodePorts") is False else len(ports))
    return {"services.nodeports": Fraction(node_ports),
            "services.loadbalancers": Fraction(1)}


def binary_keys(info: KindInfo, obj: Mapping[str, Any]) -> set[str]:
    """The usage keys whose amounts the object wrote with a binary suffix (`700Mi`), so
    they are printed back that way, as Quantity keeps its format."""
    spec = obj.get("spec") or {}
    if info.kind == "Pod":
        requests = binary_amounts(spec, "requests")
        return ({f"requests.{n}" for n in requests} | requests
                | {f"limits.{n}" for n in binary_amounts(spec, "limits")})
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if info.kind == "PersistentVolumeClaim" and str(storage).endswith("i"):
        return {"requests.storage"}
    return set()


def _selector_holds(expr: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    if expr.get("scopeName") != "PriorityClass":
        return _scope_holds(str(expr.get("scopeName")), pod)
    name = (pod.get("spec") or {}).get("priorityClassName") or ""
    op, values = expr.get("operator"), list(expr.get("values") or [])
    return {"In": name in values, "NotIn": name not in values, "Exists": bool(name),
            "DoesNotExist": not name}.get(str(op), False)


def _scope_holds(scope: str, pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    terminating = spec.get("activeDeadlineSeconds") is not None
    return {"Terminating": terminating, "NotTerminating": not terminating,
            "BestEffort": is_best_effort(pod), "NotBestEffort": not is_best_effort(pod),
            "PriorityClass": bool(spec.get("priorityClassName")),
            "CrossNamespacePodAffinity": False}.get(scope, False)


def quota_covers(quota: Mapping[str, Any], info: KindInfo, obj: Mapping[str, Any]) -> bool:
    """A quota's scopes (all must hold) apply to pods only; a scoped quota ignores other
    kinds."""
    spec = quota.get("spec") or {}
    scopes = list(spec.get("scopes") or [])
    exprs = list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])
    if not scopes and not exprs:
        return True
    if info.kind != "Pod":
        return False
    return all(_scope_holds(s, obj) for s in scopes) and all(
        _selector_holds(e, obj) for e in exprs)


def pretty(amounts: Mapping[str, Any], binary: set[str] | None = None) -> str:
    """prettyPrint of a ResourceList: `name=amount` sorted, comma-separated (computed
    amounts in the binary format for the keys in `binary`)."""
    return ",".join(
        f"{k}={canonical(v, binary=k in (binary or set())) if isinstance(v, Fraction) else v}"
        for k, v in sorted(amounts.items()))
