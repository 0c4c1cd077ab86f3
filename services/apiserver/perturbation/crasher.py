"""Crash on write, the doing: kill a Perturbation's target once its count is reached, and
record it where a user looks — `status.crashes` of the Perturbation (revision and time of
the write that fired it) and an Event (`reason: PerturbationCrash`) on the Perturbation.

Only a `pid` target is served: SIGKILL to a process on the apiserver's own host (the local
cluster; the user's supervisor restarts it). When no such process is here, nothing is
killed and the status says why. Recording never fails the write that fired it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid

from skiff.api import ApiError, lookup
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.perturbation.rules import Rule
from skiff.apiserver.storage.interface import Storage
from skiff.clock import rfc3339, rfc3339_micro

log = logging.getLogger(__name__)

REASON = "PerturbationCrash"
EVENT_NAMESPACE = "default"  # a cluster-scoped object's Events live here, as in kube


def kill(rule: Rule) -> tuple[bool, str]:
    """SIGKILL the rule's target; (killed, what happened)."""
    assert rule.crash is not None
    pid = rule.crash.pid
    if not pid:
        return False, f"cannot kill {rule.crash.describe()}: pod targets are not supported"
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False, (f"no process {pid} on the apiserver's host: a pid target works only "
                       "where the apiserver runs on the same host as the process")
    except PermissionError:
        return False, f"not allowed to kill process {pid} (another user's)"
    return True, f"killed process {pid} (SIGKILL)"


async def fire(storage: Storage, rule: Rule, *, revision: int, writer: str) -> None:
    """Kill `rule`'s target after `writer`'s write at `revision` and record it."""
    killed, message = kill(rule)
    assert rule.crash is not None
    message = (f"after {writer}'s write #{rule.crash.after} (revision {revision}): "
               f"{message}")
    log.warning("perturbation crash", extra={"perturbation": rule.name, "killed": killed,
                                             "revision": revision})
    now = time.time()
    try:
        obj = await _record_status(storage, rule, {
            "revision": revision, "time": rfc3339(now), "killed": killed,
            "target": rule.crash.describe(), "message": message})
        if obj is not None:
            await _record_event(storage, obj, message, now=now, normal=killed)
    except ApiError as err:
        log.warning("could not record a perturbation crash", extra={"error": err.message})


async def _record_status(storage: Storage, rule: Rule, crash: Obj) -> Obj | None:
    key = storage_key(lookup("perturbations"), None, rule.name)
    for _ in range(5):
        kv, _rev = await storage.get(key)
        if kv is None or kv.obj is None or kv.obj["metadata"].get("uid") != rule.uid:
            return None  # deleted (or recreated) meanwhile
        obj = kv.obj
        status = obj.setdefault("status", {})
        status["crashes"] = [*status.get("crashes", []), crash]
        try:
            return await storage.update(key, obj, expected_revision=kv.mod_revision)
        except ApiError as err:
            if err.code != 409:
                raise
    return None


async def _record_event(storage: Storage, obj: Obj, message: str, *, now: float,
                        normal: bool) -> None:
    meta = obj["metadata"]
    name = f"{meta['name']}.{int(now * 1e9):x}"
    event: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": EVENT_NAMESPACE,
                     "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(now)},
        "involvedObject": {"kind": "Perturbation", "apiVersion": "skiff.io/v1",
                           "name": meta["name"], "uid": meta.get("uid", ""),
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": REASON, "message": message, "type": "Normal" if normal else "Warning",
        "source": {"component": "skiff-apiserver"},
        "reportingComponent": "skiff-apiserver",
        "firstTimestamp": rfc3339(now), "lastTimestamp": rfc3339(now),
        "eventTime": rfc3339_micro(now), "count": 1}
    await storage.create(storage_key(lookup("events"), EVENT_NAMESPACE, name), event)
