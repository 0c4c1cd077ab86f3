"""Taint-based eviction (SPEC PS2): pods leave nodes tainted NoExecute once their
tolerations run out, by a *graceful* delete only (PS5: this controller never force deletes).

`eviction_time` is the pure decision: no NoExecute taint → never; a taint the pod does not
tolerate → now; otherwise the earliest `start + tolerationSeconds` over the taints (a
toleration without seconds tolerates forever). A taint's start is its `timeAdded` when it
has one (the node lifecycle controller's taints do), which keeps the deadline the same
across a leader fail-over. A taint without it (`kubectl taint ... :NoExecute` sends none,
and kube-apiserver 1.32 does not default it) counts from when this controller first saw it
on the pod's node, as Kubernetes' taint eviction controller counts from when it first
scheduled the pod's deletion; the controller remembers that moment per pod and taint
(`first_seen`) and forgets it when the taint goes, so a deadline never slides forward.
When it is due the pod gets a DisruptionTarget condition (reason DeletionByTaintManager),
then a graceful DELETE, and an Event TaintManagerEviction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from skiff.api import ApiError, Reason, is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NODE_NAME, NORMAL, object_key
from skiff.clock import parse_rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.podutil import (
    DISRUPTION_TARGET,
    NO_EXECUTE,
    set_condition,
    taints_of,
    tolerates,
    update_pod_status,
)

log = logging.getLogger(__name__)


REASON = "DeletionByTaintManager"
MESSAGE = "Taint manager: deleting due to NoExecute taint"

TaintId = tuple[str, str]
"""A taint's `(key, effect)`: taints are unique by key and effect on a node."""


def taint_id(taint: Mapping[str, Any]) -> TaintId:
    return str(taint.get("key") or ""), str(taint.get("effect") or "")


def eviction_time(*, taints: Iterable[Mapping[str, Any]],
                  tolerations: Iterable[Mapping[str, Any]],
                  first_seen: Mapping[TaintId, float], now: float) -> float | None:
    """Epoch seconds at which the pod must go (≤ now: at once), or None for never.
    `first_seen` says since when the controller has seen each taint that carries no
    `timeAdded` (a taint missing from it counts from `now`)."""
    tolerations = list(tolerations)
    deadline: float | None = None
    for taint in taints:
        if taint.get("effect") != NO_EXECUTE:
            continue
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return now
        seconds = [int(t["tolerationSeconds"]) for t in matching
                   if t.get("tolerationSeconds") is not None]
        if not seconds:
            continue  # tolerated forever
        added = taint.get("timeAdded")
        start = parse_rfc3339(str(added)) if added else first_seen.get(taint_id(taint), now)
        due = start + max(0, min(seconds))
        deadline = due if deadline is None else min(deadline, due)
    return deadline


class TaintEvictionController(Controller):
    name = "taint-eviction-controller"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=context.settings.concurrent_taint_eviction_syncs)
        self.pods = context.informers.pods()
        self.nodes = context.informers.nodes()
        self.recorder = context.recorder("taint-eviction-controller")
        self.scheduled: set[str] = set()
        # pod key → its node's NoExecute taints → when this controller first saw them.
        self.first_seen: dict[str, dict[TaintId, float]] = {}
        self.pods.add_handler(on_add=self._on_pod, on_update=lambda _o, n: self._on_pod(n),
                              on_delete=lambda p: self.forget(object_key(p)))
        self.nodes.add_handler(on_add=self._on_node, on_update=self._on_node_update)

    def _on_pod(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.enqueue(object_key(pod))

    def _on_node(self, node: Obj) -> None:
        if any(t.get("effect") == NO_EXECUTE for t in taints_of(node)):
            self._enqueue_pods_of(node)

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        if taints_of(old) != taints_of(new):
            self._enqueue_pods_of(new)

    def _enqueue_pods_of(self, node: Obj) -> None:
        for pod in self.pods.store.by_index(BY_NODE_NAME, str(node["metadata"]["name"])):
            self.enqueue(object_key(pod))

    def forget(self, key: str) -> None:
        self.scheduled.discard(key)
        self.first_seen.pop(key, None)

    def observe_taints(self, key: str, taints: list[Obj], *, now: float) -> dict[TaintId, float]:
        """When each NoExecute taint now on the pod's node was first seen: a taint seen
        before keeps its moment, a new one starts now, a removed one is forgotten (so
        adding it again starts over)."""
        before = self.first_seen.get(key) or {}
        seen = {tid: before.get(tid, now) for tid in
                (taint_id(t) for t in taints if t.get("effect") == NO_EXECUTE)}
        if seen:
            self.first_seen[key] = seen
        else:
            self.first_seen.pop(key, None)
        return seen

    async def reconcile(self, key: str) -> float | None:
        pod = self.pods.store.get(key)
        if pod is None or is_terminating(pod) or is_pod_terminal(pod):
            self.forget(key)
            return None
        node = self.nodes.store.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        now = self.clock.now()
        taints = [] if node is None else taints_of(node)
        first_seen = self.observe_taints(key, taints, now=now)
        due = None if node is None else eviction_time(
            taints=taints, tolerations=(pod.get("spec") or {}).get("tolerations") or [],
            first_seen=first_seen, now=now)
        if due is None:
            if key in self.scheduled:
                self.scheduled.discard(key)
                await self.recorder.event(pod, NORMAL, "TaintManagerEviction",
                                          f"Cancelling deletion of Pod {key}")
            return None
        if due > now:
            self.scheduled.add(key)
            return due - now
        await self.evict(pod)
        self.forget(key)
        return None

    async def evict(self, pod: Obj) -> None:
        """DisruptionTarget condition first, then a graceful delete (the pod's own period)."""
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace"), meta["name"], meta.get("uid")

        def mark(p: Obj) -> bool:
            # A disruption already under way keeps its reason: on a fenced node the
            # fencing controller marks DeletionByFencing and force deletes; its own
            # NoExecute cordon must not relabel that pod as this controller's eviction.
            if any(c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
                   for c in (p.get("status") or {}).get("conditions") or []):
                return False
            return set_condition(p, DISRUPTION_TARGET, "True", now=self.clock.now(),
                                 reason=REASON, message=MESSAGE)

        if await update_pod_status(self.client, pod, mark) is None:
            return
        try:
            await self.client.delete("pods", name, ns, uid=uid)
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return
            raise
        log.info("taint manager evicting pod", extra={"pod": f"{ns}/{name}"})
        await self.recorder.event(pod, NORMAL, "TaintManagerEviction",
                                  f"Marking for deletion Pod {ns}/{name}")
