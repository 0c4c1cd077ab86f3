"""The PodGC controller (SPEC PS3): one of the only three force-deleters (PS5).

Every `pod-gc-period` one `gc()` pass runs its four named steps over the informer caches.
Each pod it removes is first marked Failed through the status subresource — an orphaned
pod (its node is gone) also gets a DisruptionTarget condition, reason DeletionByPodGC, as
in Kubernetes 1.32 — then force deleted (grace 0, with a UID
precondition so a same-named replacement is never hit). Deleting a Node is the signal that
it is permanently gone: pods bound to it go only after the quarantine and a fresh GET of
the node from the apiserver, never on the cache's word alone.
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, Reason, is_pod_terminal
from skiff.api.types import Obj
from skiff.client import NORMAL
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.podgc.selection import (
    Quarantine,
    missing_nodes,
    select_orphaned,
    select_out_of_service,
    select_terminated,
    select_unscheduled_terminating,
)
from skiff.controller_manager.podutil import DISRUPTION_TARGET, set_condition, update_pod_status

log = logging.getLogger(__name__)


GC_KEY = "gc"
REASON = "DeletionByPodGC"
MESSAGE_ORPHANED = "PodGC: node no longer exists"
MESSAGE_UNSCHEDULED = "PodGC: pod is terminating and was never scheduled"
MESSAGE_OUT_OF_SERVICE = "PodGC: node is out of service"
MESSAGE_TERMINATED = "PodGC: too many terminated pods"


class PodGCController(Controller):
    name = "podgc"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=1, resync_period=s.pod_gc_period)
        self.pods = context.informers.pods()
        self.nodes = context.informers.nodes()
        self.threshold = s.terminated_pod_gc_threshold
        self.quarantine = Quarantine(s.pod_gc_quarantine_time)
        self.recorder = context.recorder("pod-garbage-collector")

    def resync(self) -> None:
        self.enqueue(GC_KEY)

    async def reconcile(self, key: str) -> float | None:
        return await self.gc()

    async def gc(self) -> float | None:
        """One pass; returns when to look again for a quarantine that ends before the next
        period."""
        pods, nodes = self.pods.store.list(), self.nodes.store.list()
        if self.threshold > 0:
            await self.gc_terminated(pods)
        await self.gc_out_of_service(pods, nodes)
        await self.gc_orphaned(pods, nodes)
        await self.gc_unscheduled_terminating(pods)
        return self.quarantine.next_due_in(self.clock.monotonic())

    async def gc_terminated(self, pods: list[Obj]) -> None:
        for pod in select_terminated(pods, threshold=self.threshold):
            await self.mark_failed_and_delete(pod, why=MESSAGE_TERMINATED)

    async def gc_out_of_service(self, pods: list[Obj], nodes: list[Obj]) -> None:
        for pod in select_out_of_service(pods, nodes):
            await self.mark_failed_and_delete(pod, why=MESSAGE_OUT_OF_SERVICE)

    async def gc_orphaned(self, pods: list[Obj], nodes: list[Obj]) -> None:
        now = self.clock.monotonic()
        known = {str(n["metadata"]["name"]) for n in nodes}
        self.quarantine.update(missing_nodes(pods, known), now)
        deleted: set[str] = set()
        for node_name in sorted(self.quarantine.due(now)):
            if await self._node_exists(node_name):
                self.quarantine.forget(node_name)
            else:
                deleted.add(node_name)
        for pod in select_orphaned(pods, deleted_nodes=deleted):
            await self.mark_failed_and_delete(pod, why=MESSAGE_ORPHANED,
                                              disruption_target=True)

    async def gc_unscheduled_terminating(self, pods: list[Obj]) -> None:
        for pod in select_unscheduled_terminating(pods):
            await self.mark_failed_and_delete(pod, why=MESSAGE_UNSCHEDULED)

    async def _node_exists(self, name: str) -> bool:
        """The fresh re-check: ask the apiserver, not the cache."""
        try:
            await self.client.get("nodes", name)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return False
            raise
        return True

    async def mark_failed_and_delete(self, pod: Obj, *, why: str,
                                     disruption_target: bool = False) -> None:
        """Phase Failed (unless already terminal) — with a DisruptionTarget condition for
        an orphaned pod — then force delete."""
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace"), meta["name"], meta.get("uid")
        if not is_pod_terminal(pod):
            def mark(p: Obj) -> bool:
                if is_pod_terminal(p):
                    return False
                p.setdefault("status", {})["phase"] = "Failed"
                if disruption_target:
                    set_condition(p, DISRUPTION_TARGET, "True", now=self.clock.now(),
                                  reason=REASON, message=why)
                return True

            if await update_pod_status(self.client, pod, mark) is None:
                return  # gone already, or replaced by a pod with another UID
        log.info("PodGC is force deleting pod", extra={"pod": f"{ns}/{name}", "why": why})
        try:
            await self.client.delete("pods", name, ns, grace_period_seconds=0, uid=uid)
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return
            raise
        await self.recorder.event(pod, NORMAL, REASON, f"{why}; force deleted the pod")
