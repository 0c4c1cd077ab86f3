"""Crash on write, the doing: kill a Perturbation's target once its count is reached, and
record it where a user looks — `status.crashes` of the Perturbation (revision and time of
the write that fired it) and an Event (`reason: PerturbationCrash`) on the Perturbation.

A `pod` target: the kubelet of the pod's node is asked (its own port, the apiserver's
kubelet client certificate, as for logs) to SIGKILL the container, which it restarts per
the pod's restartPolicy; the Event is on the pod. A `pid` target: SIGKILL to a process on
the apiserver's own host (the local cluster; the user's supervisor restarts it); when no
such process is here, nothing is killed and the status says why. Recording never fails
the write that fired it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from collections.abc import Callable

from skiff.api import ApiError, lookup
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.perturbation.rules import Rule
from skiff.apiserver.storage.interface import Storage
from skiff.client.credentials import Credentials
from skiff.client.kubeletkill import kill_container
from skiff.client.logs import kubelet_endpoint
from skiff.clock import rfc3339, rfc3339_micro

log = logging.getLogger(__name__)

REASON = "PerturbationCrash"
EVENT_NAMESPACE = "default"  # a cluster-scoped object's Events live here, as in kube


async def kill_pod(storage: Storage, rule: Rule, kubelet: Credentials | None
                   ) -> tuple[bool, str, Obj | None]:
    """Have the pod's kubelet SIGKILL its container; (killed, what happened, the pod)."""
    assert rule.crash is not None
    namespace, name, container = rule.crash.pod
    pod_kv, _ = await storage.get(storage_key(lookup("pods"), namespace, name))
    pod = pod_kv.obj if pod_kv is not None else None
    if pod is None:
        return False, f'cannot kill a container: pod "{name}" in "{namespace}" not found', None
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    node_kv, _ = await storage.get(storage_key(lookup("nodes"), None, node_name)) \
        if node_name else (None, 0)
    if node_kv is None or node_kv.obj is None:
        return False, f'cannot kill a container: pod "{name}" is not on a node', pod
    try:
        killed, pid = await kill_container(kubelet_endpoint(node_kv.obj),
                                           namespace=namespace, name=name,
                                           container=container or None,
                                           credentials=kubelet)
    except ApiError as err:
        return False, f"the kubelet did not kill the container: {err.message}", pod
    return True, f"killed container {killed} (pid {pid}, SIGKILL) on node {node_name}", pod


def kill(rule: Rule) -> tuple[bool, str]:
    """SIGKILL the rule's pid target; (killed, what happened)."""
    assert rule.crash is not None
    pid = rule.crash.pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False, (f"no process {pid} on the apiserver's host: a pid target works only "
                       "where the apiserver runs on the same host as the process")
    except PermissionError:
        return False, f"not allowed to kill process {pid} (another user's)"
    return True, f"killed process {pid} (SIGKILL)"


async def fire(storage: Storage, rule: Rule, *, revision: int, writer: str,
               kubelet: Credentials | None = None, done: tuple[bool, str] | None = None,
               event_ttl: int = 0) -> tuple[bool, str]:
    """Kill `rule`'s target after `writer`'s write at `revision` (unless `done`, the
    outcome of a kill already made) and record it; (killed, what happened)."""
    assert rule.crash is not None
    pod: Obj | None = None
    try:
        if done is not None:
            killed, message = done
        elif rule.crash.pid:
            killed, message = kill(rule)
        else:
            killed, message, pod = await kill_pod(storage, rule, kubelet)
    except ApiError as err:
        killed, message = False, f"could not kill {rule.crash.describe()}: {err.message}"
    message = (f"after {writer}'s write #{rule.crash.after} (revision {revision}): "
               f"{message}")
    log.warning("perturbation crash", extra={"perturbation": rule.name, "killed": killed,
                                             "revision": revision})
    now = time.time()
    crash = {"revision": revision, "time": rfc3339(now), "killed": killed,
             "target": rule.crash.describe(), "message": message}
    try:
        obj = await record_status(storage, rule, lambda status: status.update(
            crashes=[*status.get("crashes", []), crash]))
        if obj is not None:
            await _record_event(storage, pod or obj, message, now=now, normal=killed,
                                ttl=event_ttl)
    except ApiError as err:
        log.warning("could not record a perturbation crash", extra={"error": err.message})
    return killed, message


async def record_status(storage: Storage, rule: Rule, change: Callable[[Obj], object]
                        ) -> Obj | None:
    """Apply `change` to the stored Perturbation's status (None: it is gone)."""
    key = storage_key(lookup("perturbations"), None, rule.name)
    for _ in range(5):
        kv, _rev = await storage.get(key)
        if kv is None or kv.obj is None or kv.obj["metadata"].get("uid") != rule.uid:
            return None  # deleted (or recreated) meanwhile
        obj = kv.obj
        change(obj.setdefault("status", {}))
        try:
            return await storage.update(key, obj, expected_revision=kv.mod_revision)
        except ApiError as err:
            if err.code != 409:
                raise
    return None


async def _record_event(storage: Storage, obj: Obj, message: str, *, now: float,
                        normal: bool, ttl: int) -> None:
    """An Event on `obj` (the pod, or the Perturbation for a pid target)."""
    meta = obj["metadata"]
    name = f"{meta['name']}.{int(now * 1e9):x}"
    namespace = str(meta.get("namespace") or EVENT_NAMESPACE)
    event: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace,
                     "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(now)},
        "involvedObject": {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", ""),
                           "name": meta["name"], "namespace": meta.get("namespace", ""),
                           "uid": meta.get("uid", ""),
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": REASON, "message": message, "type": "Normal" if normal else "Warning",
        "source": {"component": "skiff-apiserver"},
        "reportingComponent": "skiff-apiserver",
        "firstTimestamp": rfc3339(now), "lastTimestamp": rfc3339(now),
        "eventTime": rfc3339_micro(now), "count": 1}
    await storage.create(storage_key(lookup("events"), namespace, name), event, ttl=ttl)
