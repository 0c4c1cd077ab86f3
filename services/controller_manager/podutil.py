"""Pod and node questions and writes that several controllers share.

Readiness (`IsPodReady`), activeness (`FilterActivePods`), conditions, taints and
tolerations mean the same thing to the node lifecycle, ReplicaSet, StatefulSet and
disruption controllers, so they are answered once here. `update_pod_status` is the one way
a controller writes a pod's status: from a deep copy of the cached pod, re-reading it on a
Conflict, never mutating what the informer holds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from skiff.api import ApiError, Reason, get_condition, is_pod_terminal, is_terminating
from skiff.api.pods import set_condition as set_condition
from skiff.api.pods import tolerates as tolerates  # shared with the kubelet
from skiff.api.types import Obj
from skiff.client import Client
from skiff.clock import parse_rfc3339

DISRUPTION_TARGET = "DisruptionTarget"
NO_EXECUTE, NO_SCHEDULE = "NoExecute", "NoSchedule"


def condition_status(obj: Mapping[str, Any], condition_type: str) -> str | None:
    cond = get_condition(obj, condition_type)
    return str(cond.get("status")) if cond is not None else None


def service_selects(selector: Mapping[str, str], pod: Mapping[str, Any]) -> bool:
    """A Service's selector (a plain map; empty selects nothing) matches the pod's labels."""
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """podutil.FindPort: a Service port's targetPort on this pod (its `port` when unset; a
    name is looked up among the containers' ports of the same protocol); None when the
    pod has no port of that name."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol", "TCP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    return condition_status(pod, "Ready") == "True"


def is_running_and_ready(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod)


def is_active(pod: Mapping[str, Any]) -> bool:
    """Counts toward a ReplicaSet's replicas: not terminal and not terminating."""
    return not is_pod_terminal(pod) and not is_terminating(pod)


def creation_time(obj: Mapping[str, Any]) -> float:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    return parse_rfc3339(stamp) if stamp else 0.0


async def update_pod_status(client: Client, pod: Mapping[str, Any],
                            mutate: Callable[[Obj], bool], *, attempts: int = 3) -> Obj | None:
    """Apply `mutate` to a copy of `pod` and write its status; on Conflict read the pod
    again and retry. Returns the stored pod, or None when it is gone or its UID changed.
    `mutate` returns False when there is nothing to write."""
    uid = pod.get("metadata", {}).get("uid")
    current: Obj = copy.deepcopy(dict(pod))
    for attempt in range(attempts):
        if not mutate(current):
            return current
        try:
            return await client.update_status(current)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            if not _retryable(err, attempt, attempts):
                raise
        meta = current["metadata"]
        try:
            current = await client.get("pods", meta["name"], meta.get("namespace"))
        except ApiError as get_err:
            if get_err.reason == Reason.NOT_FOUND:
                return None
            raise
        if uid and current["metadata"].get("uid") != uid:
            return None
    return None  # pragma: no cover - the loop returns or raises


def _retryable(err: ApiError, attempt: int, attempts: int) -> bool:
    return err.reason == Reason.CONFLICT and attempt < attempts - 1


# -- taints and tolerations -----------------------------------------------------------------


def taints_of(node: Mapping[str, Any]) -> list[Obj]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]


def has_taint(node: Mapping[str, Any], key: str, effect: str | None = None) -> bool:
    return any(t.get("key") == key and (effect is None or t.get("effect") == effect)
               for t in taints_of(node))


def same_taints(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]) -> bool:
    def norm(taints: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
        return {(str(t.get("key")), str(t.get("value") or ""), str(t.get("effect")))
                for t in taints}
    return norm(a) == norm(b)


def ready_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod's Ready condition last changed (epoch seconds), if known."""
    stamp = (get_condition(pod, "Ready") or {}).get("lastTransitionTime")
    return parse_rfc3339(str(stamp)) if stamp else None


def is_available(pod: Mapping[str, Any], *, min_ready_seconds: int, now: float) -> bool:
    """`podutil.IsPodAvailable`: ready, and for at least `min_ready_seconds`."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready_seconds <= now


def available_in(pods: Iterable[Mapping[str, Any]], *, min_ready_seconds: int,
                 now: float) -> float | None:
    """Seconds until the next ready-but-not-yet-available pod becomes available."""
    waits = [since + min_ready_seconds - now for p in pods if is_pod_ready(p)
             and (since := ready_since(p)) is not None and since + min_ready_seconds > now]
    return min(waits) if waits else None
