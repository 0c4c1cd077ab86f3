"""Table columns like kubectl's, and the status words people look for (SPEC GT12, LC3).

Shared by the `skiff` CLI and the apiserver's server-side Table output for kubectl.

`pod_status` follows kubectl's printPod: an init container's problem shows as `Init:…`, a
waiting container's reason (`CrashLoopBackOff`) or a terminated one's wins over the phase,
and a pod with a deletionTimestamp is `Terminating`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skiff.api import (
    accountkinds,
    autoscaling,
    cronjobs,
    limitranges,
    networking,
    quotas,
    storagecapacity,
)
from skiff.clock import parse_rfc3339

Obj = dict[str, Any]


def age(timestamp: str | None, *, now: float | None = None) -> str:
    """kubectl's HumanDuration: 5s, 2m3s, 10m, 3h4m, 5d."""
    if not timestamp:
        return "<unknown>"
    seconds = int((now or time.time()) - parse_rfc3339(timestamp))
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _condition(obj: Obj, type_: str) -> Obj | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def pod_status(pod: Obj) -> str:
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase") or "Pending"
    scheduled = _condition(pod, "PodScheduled")
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
            ready = _condition(pod, "Ready")
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


def node_status(node: Obj) -> str:
    ready = _condition(node, "Ready")
    if ready is None or ready.get("status") == "Unknown":
        word = "Unknown" if ready else "NotReady"
    else:
        word = "Ready" if ready.get("status") == "True" else "NotReady"
    if node.get("spec", {}).get("unschedulable"):
        word += ",SchedulingDisabled"
    return word


Column = tuple[str, Callable[[Obj], str]]


def _meta(field: str) -> Callable[[Obj], str]:
    return lambda o: str(o.get("metadata", {}).get(field, ""))


def _age(o: Obj) -> str:
    return age(o.get("metadata", {}).get("creationTimestamp"))


def _role_ref(o: Obj) -> str:
    ref = o.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _gates(o: Obj) -> str:
    gates = o.get("spec", {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    ok = sum(1 for g in gates if (_condition(o, g.get("conditionType", "")) or {}).get(
        "status") == "True")
    return f"{ok}/{len(gates)}"


# ReplicaSets and ReplicationControllers (kubectl's printReplicaSet/printReplicationController)
_REPLICAS: list[Column] = [
    ("NAME", _meta("name")),
    ("DESIRED", lambda o: str(o.get("spec", {}).get("replicas", 0))),
    ("CURRENT", lambda o: str(o.get("status", {}).get("replicas", 0))),
    ("READY", lambda o: str(o.get("status", {}).get("readyReplicas", 0))),
    ("AGE", _age)]

def node_roles(node: Obj) -> str:
    """kubectl's findNodeRoles: `node-role.kubernetes.io/<role>` labels and the
    `kubernetes.io/role` label's value, sorted."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = {key.removeprefix("node-role.kubernetes.io/") for key in labels
             if key.startswith("node-role.kubernetes.io/")}
    if labels.get("kubernetes.io/role"):
        roles.add(str(labels["kubernetes.io/role"]))
    roles.discard("")
    return ",".join(sorted(roles)) or "<none>"


COLUMNS: dict[str, list[Column]] = {
    "Pod": [("NAME", _meta("name")), ("READY", pod_ready), ("STATUS", pod_status),
            ("RESTARTS", pod_restarts), ("AGE", _age)],
    "Node": [("NAME", _meta("name")), ("STATUS", node_status),
             ("ROLES", node_roles), ("AGE", _age),
             ("VERSION", lambda o: str(o.get("status", {}).get("nodeInfo", {}).get(
                 "kubeletVersion", "")))],
    "Namespace": [("NAME", _meta("name")),
                  ("STATUS", lambda o: str(o.get("status", {}).get("phase", "Active"))),
                  ("AGE", _age)],
    "ReplicaSet": _REPLICAS,
    "ReplicationController": _REPLICAS,
    "StatefulSet": [("NAME", _meta("name")),
                    ("READY", lambda o: f"{o.get('status', {}).get('readyReplicas', 0)}/"
                                        f"{o.get('spec', {}).get('replicas', 0)}"),
                    ("AGE", _age)],
    "PodDisruptionBudget": [
        ("NAME", _meta("name")),
        ("MIN AVAILABLE", lambda o: str(o.get("spec", {}).get("minAvailable", "N/A"))),
        ("MAX UNAVAILABLE", lambda o: str(o.get("spec", {}).get("maxUnavailable", "N/A"))),
        ("ALLOWED DISRUPTIONS",
         lambda o: str(o.get("status", {}).get("disruptionsAllowed", 0))),
        ("AGE", _age)],
    "PriorityClass": [("NAME", _meta("name")), ("VALUE", lambda o: str(o.get("value", ""))),
                      ("GLOBAL-DEFAULT", lambda o: str(bool(o.get("globalDefault"))).lower()),
                      ("PREEMPTIONPOLICY", lambda o: str(o.get("preemptionPolicy", ""))),
                      ("AGE", _age)],
    "Lease": [("NAME", _meta("name")),
              ("HOLDER", lambda o: str(o.get("spec", {}).get("holderIdentity", ""))),
              ("AGE", _age)],
    "PersistentVolumeClaim": [
        ("NAME", _meta("name")),
        ("STATUS", lambda o: str(o.get("status", {}).get("phase", ""))),
        ("VOLUME", lambda o: str(o.get("spec", {}).get("volumeName", "") or "")),
        # kubectl's printer: capacity and access modes from the status, once bound
        ("CAPACITY", lambda o: str((o.get("status", {}).get("capacity") or {}).get(
            "storage", "")) if o.get("spec", {}).get("volumeName") else ""),
        ("ACCESS MODES", lambda o: ",".join(
            {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}.get(m, m)
            for m in o.get("status", {}).get("accessModes") or [])
         if o.get("spec", {}).get("volumeName") else ""),
        ("STORAGECLASS", lambda o: str(o.get("spec", {}).get("storageClassName") or "")),
        ("VOLUMEATTRIBUTESCLASS", lambda o: str(o.get("spec", {}).get(
            "volumeAttributesClassName") or "<unset>")),
        ("AGE", _age)],
    "Role": [("NAME", _meta("name")), ("CREATED AT", _meta("creationTimestamp"))],
    "ClusterRole": [("NAME", _meta("name")), ("CREATED AT", _meta("creationTimestamp"))],
    "RoleBinding": [("NAME", _meta("name")), ("ROLE", lambda o: _role_ref(o)),
                    ("AGE", _age)],
    "ClusterRoleBinding": [("NAME", _meta("name")), ("ROLE", lambda o: _role_ref(o)),
                           ("AGE", _age)],
    "VolumeAttachment": [
        ("NAME", _meta("name")),
        ("ATTACHER", lambda o: str(o.get("spec", {}).get("attacher", ""))),
        ("PV", lambda o: str(o.get("spec", {}).get("source", {}).get(
            "persistentVolumeName", ""))),
        ("NODE", lambda o: str(o.get("spec", {}).get("nodeName", ""))),
        ("ATTACHED", lambda o: str(bool(o.get("status", {}).get("attached"))).lower()),
        ("AGE", _age)],
    "Fence": [
        ("NAME", _meta("name")),
        ("AGENT", lambda o: str(o.get("spec", {}).get("agent", ""))),
        ("PHASE", lambda o: str(o.get("status", {}).get("phase", ""))),
        ("REASON", lambda o: str(o.get("spec", {}).get("reason", ""))),
        ("AGE", _age)],
    "Event": [("LAST SEEN", lambda o: age(o.get("lastTimestamp"))),
              ("TYPE", lambda o: str(o.get("type", ""))),
              ("REASON", lambda o: str(o.get("reason", ""))),
              ("OBJECT", lambda o: f"{o.get('involvedObject', {}).get('kind', '').lower()}/"
                                   f"{o.get('involvedObject', {}).get('name', '')}"),
              ("MESSAGE", lambda o: str(o.get("message", "")))],
    **accountkinds.columns(_meta, _age),
    **limitranges.columns(_meta),
    **quotas.columns(_meta, _age),
    **cronjobs.columns(_meta, age),
    **autoscaling.columns(_meta, age),
    **networking.columns(_meta, _age),
    **storagecapacity.columns(_meta),
}

WIDE: dict[str, list[Column]] = {
    "Pod": [("IP", lambda o: str(o.get("status", {}).get("podIP", "<none>") or "<none>")),
            ("NODE", lambda o: str(o.get("spec", {}).get("nodeName") or "<none>")),
            ("NOMINATED NODE",
             lambda o: str(o.get("status", {}).get("nominatedNodeName") or "<none>")),
            ("READINESS GATES", _gates)],
    "Node": [("INTERNAL-IP", lambda o: _address(o, "InternalIP")),
             ("EXTERNAL-IP", lambda o: _address(o, "ExternalIP")),
             ("OS-IMAGE", lambda o: _node_info(o, "osImage")),
             ("KERNEL-VERSION", lambda o: _node_info(o, "kernelVersion")),
             ("CONTAINER-RUNTIME", lambda o: _node_info(o, "containerRuntimeVersion"))],
    "PersistentVolumeClaim": [("VOLUMEMODE", lambda o: str(
        o.get("spec", {}).get("volumeMode") or "<unset>"))],
    "RoleBinding": [("USERS", lambda o: _subjects(o, "User")),
                    ("GROUPS", lambda o: _subjects(o, "Group")),
                    ("SERVICEACCOUNTS", lambda o: _subjects(o, "ServiceAccount"))],
    "ClusterRoleBinding": [("USERS", lambda o: _subjects(o, "User")),
                           ("GROUPS", lambda o: _subjects(o, "Group")),
                           ("SERVICEACCOUNTS", lambda o: _subjects(o, "ServiceAccount"))],
}


def _address(o: Obj, type_: str) -> str:
    return next((str(a.get("address", "")) for a in o.get("status", {}).get("addresses", [])
                 if a.get("type") == type_), "<none>")


def _node_info(o: Obj, field: str) -> str:
    return str(o.get("status", {}).get("nodeInfo", {}).get(field) or "<unknown>")


def _subjects(o: Obj, kind: str) -> str:
    """A binding's subjects of one kind, as kubectl lists them (`ns/name` for accounts)."""
    names = [f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount"
             else str(s.get("name", "")) for s in o.get("subjects") or []
             if s.get("kind") == kind]
    return ", ".join(names)

DEFAULT_COLUMNS: list[Column] = [("NAME", _meta("name")), ("AGE", _age)]


def columns_for(kind: str, *, wide: bool = False, namespace_column: bool = False
                ) -> list[Column]:
    cols = list(COLUMNS.get(kind, DEFAULT_COLUMNS))
    if kind == "Pod" and not wide:
        # NODE is what people watching partitions look for; kubectl needs -o wide for it.
        cols.append(("NODE", lambda o: str(o.get("spec", {}).get("nodeName") or "<none>")))
    if wide:
        cols += WIDE.get(kind, [])
    if namespace_column:
        cols.insert(0, ("NAMESPACE", _meta("namespace")))
    return cols


def table(rows: list[list[str]], headers: list[str] | None = None) -> str:
    all_rows = ([headers] if headers else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
             for r in all_rows]
    return "\n".join(lines)


def render(objs: list[Obj], kind: str, *, wide: bool = False, namespace_column: bool = False,
           headers: bool = True) -> str:
    cols = columns_for(kind, wide=wide, namespace_column=namespace_column)
    rows = [[fn(o) for _, fn in cols] for o in objs]
    return table(rows, [name for name, _ in cols] if headers else None)
