"""The fencing controller (SPEC FN1, FN3): the automatic actor of "Fencing".

It never fences anything itself. It *requests* a fence by creating the `Fence` named after
the node (the create is the compare-and-swap: one Fence per node, whoever is first), with
the finalizer `skiff.io/fence-agent`; the fence-agent service moves its `status.phase`
Pending → Fencing → Fenced (with `confirmedAt`) or Failed. Only a **Fenced** Fence — the
agent's confirmation that the node's processes cannot run — lets this controller act: it
cordons the node, gives each of its pods a DisruptionTarget condition (DeletionByFencing)
and force deletes it (grace 0, UID precondition; PS5 names this controller as one of the
three force-deleters), so a StatefulSet can recreate the identity elsewhere.

Each reconcile works on one node key and recomputes everything from the informer caches:
the Fence is the record of how far fencing got, so a controller-manager that crashes or
loses its Lease mid-fence is replaced by one that continues from the same place, and the
Fence's `podsDeleted` tells how many pods went. A Failed Fence is deleted after
`--fencing-retry-backoff` (counted from when this process first saw it Failed; a restart
restarts the wait, which only delays) and requested again if the node still qualifies —
the agent removes its finalizer from a Failed Fence it never applied. Unfencing is explicit:
a user deletes the Fence; while it exists, terminating or not, the node stays cordoned.
No fence is requested while every zone is fully disrupted (a control-plane-side partition,
see safety.py), nor for a fencing delay after such a disruption ends.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.api.wellknown import FENCE_FINALIZER
from skiff.client import BY_NODE_NAME, NORMAL, WARNING
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.fencing.cordon import cordoned, uncordoned
from skiff.controller_manager.fencing.policy import FencingPolicy, Verdict, decide
from skiff.controller_manager.fencing.safety import ControlPlaneGuard
from skiff.controller_manager.podutil import DISRUPTION_TARGET, set_condition, update_pod_status

log = logging.getLogger(__name__)


PENDING, FENCING, FENCED, FAILED = "Pending", "Fencing", "Fenced", "Failed"
REASON = "DeletionByFencing"


def fence_phase(fence: Obj) -> str:
    return str((fence.get("status") or {}).get("phase") or PENDING)


def fence_object(*, node_name: str, verdict: Verdict, requested_by: str) -> Obj:
    """The Fence this controller requests for a node."""
    return {"apiVersion": "skiff.io/v1", "kind": "Fence",
            "metadata": {"name": node_name, "finalizers": [FENCE_FINALIZER]},
            "spec": {"nodeName": node_name, "agent": verdict.agent, "reason": verdict.why,
                     "requestedBy": requested_by}}


def request_message(verdict: Verdict) -> str:
    """What the Fence will move: pods that opted in, and how many a PDB covers."""
    return (f"fencing for {len(verdict.pods)} opted-in pod(s) ({', '.join(verdict.pods)}); "
            f"{verdict.pdb_covered} pod(s) on the node are covered by a PodDisruptionBudget "
            "(fencing is recovery, not disruption: budgets do not block it)")


class FencingController(Controller):
    name = "fencing"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=s.concurrent_fencing_syncs)
        self.policy = FencingPolicy(delay=s.fencing_delay, default_agent=s.default_fence_agent,
                                    min_priority=s.fencing_min_priority)
        self.retry_backoff = s.fencing_retry_backoff
        self.guard = ControlPlaneGuard(delay=s.fencing_delay,
                                       unhealthy_zone_threshold=s.unhealthy_zone_threshold)
        self.held: set[str] = set()  # nodes whose fence the guard holds (logged once)
        self.requested_by = f"controller-manager/{s.identity}"
        self.nodes = context.informers.nodes()
        self.pods = context.informers.pods()
        self.fences = context.informers.fences()
        self.pdbs = context.informers.pod_disruption_budgets()
        self.recorder = context.recorder("fencing-controller")
        self.failed_seen: dict[str, float] = {}  # Fence UID → when first seen Failed
        self.nodes.add_handler(on_add=self._on_named, on_update=lambda _o, n: self._on_named(n),
                               on_delete=self._on_named)
        self.fences.add_handler(on_add=self._on_named,
                                on_update=lambda _o, n: self._on_named(n),
                                on_delete=self._on_named)
        self.pods.add_handler(on_add=self._on_pod, on_update=self._on_pod_update,
                              on_delete=self._on_pod)

    def _on_named(self, obj: Obj) -> None:
        self.enqueue(str(obj["metadata"]["name"]))

    def _on_pod(self, pod: Obj) -> None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            self.enqueue(str(node_name))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(old)
        self._on_pod(new)

    async def reconcile(self, key: str) -> float | None:
        node = self.nodes.store.get(key)
        if node is None:
            return None  # a deleted node's pods are PodGC's (PS3)
        fence = self.fences.store.get(key)
        if fence is None:
            node = await self.lift_cordon(node)
            return await self.request_fence_if_due(node)
        if is_terminating(fence):
            return None  # being unfenced: the cordon stays until the Fence is gone
        phase = fence_phase(fence)
        if phase == FENCED:
            await self.act_on_confirmed_fence(node, fence)
        elif phase == FAILED:
            return await self.retry_failed_fence(node, fence)
        return None  # Pending, Fencing, Unfencing: the agent's turn

    # -- detect and decide ---------------------------------------------------------------

    async def request_fence_if_due(self, node: Obj) -> float | None:
        name = str(node["metadata"]["name"])
        verdict = decide(node=node, pods=self.pods.store.by_index(BY_NODE_NAME, name),
                         pdbs=self.pdbs.store.list(), policy=self.policy,
                         now=self.clock.now())
        if not verdict.fence:
            return verdict.recheck_in
        held, recheck_in = self.guard.hold(self.nodes.store.list(), self.clock.now())
        if held is not None:
            if name not in self.held:
                self.held.add(name)
                log.warning("not fencing a partitioned node", extra={"node": name,
                                                                      "why": held})
            return recheck_in
        self.held.discard(name)
        try:
            created = await self.client.create(fence_object(
                node_name=name, verdict=verdict, requested_by=self.requested_by))
        except ApiError as err:
            if err.reason == Reason.ALREADY_EXISTS:
                return None  # requested already (by us before a restart, or a peer)
            raise
        message = request_message(verdict)
        log.warning("requested a fence for a partitioned node",
                    extra={"node": name, "agent": verdict.agent, "why": verdict.why,
                           "pods": list(verdict.pods)})
        await self.recorder.event(node, WARNING, "FencingRequested",
                                  f"Fence {name} requested with agent {verdict.agent}: "
                                  f"{verdict.why}; {message}")
        await self._note(created, message)
        return None

    async def _note(self, fence: Obj, message: str) -> None:
        """Best effort: put the request's message on a still-Pending Fence. If the agent
        has written the status meanwhile (Conflict) the Event above still says it."""
        updated = copy.deepcopy(fence)
        updated.setdefault("status", {}).setdefault("phase", PENDING)
        updated["status"]["message"] = message
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.reason not in (Reason.CONFLICT, Reason.NOT_FOUND):
                raise

    # -- act on the agent's answer -------------------------------------------------------

    async def act_on_confirmed_fence(self, node: Obj, fence: Obj) -> None:
        """FN3: cordon, then DisruptionTarget + force delete every pod of the node."""
        name = str(node["metadata"]["name"])
        agent = str(fence["spec"].get("agent"))
        status = fence.get("status") or {}
        first_time = status.get("podsDeleted") is None
        if first_time:
            await self.recorder.event(
                node, NORMAL, "FencingConfirmed",
                f"Fence {name} confirmed by the {agent} agent at "
                f"{status.get('confirmedAt') or 'an unknown time'}; deleting the node's pods")
        await self.cordon(node)
        deleted = 0
        for pod in self.pods.store.by_index(BY_NODE_NAME, name):
            if await self.force_delete(pod, fence_name=name, agent=agent):
                deleted += 1
        if deleted or first_time:
            updated = copy.deepcopy(fence)
            updated["status"] = {**status,
                                 "podsDeleted": int(status.get("podsDeleted") or 0) + deleted}
            await self.client.update_status(updated)  # Conflict → requeue, recompute

    async def cordon(self, node: Obj) -> Obj:
        updated = cordoned(node, now=self.clock.now())
        if updated is None:
            return node
        stored = await self.client.update(updated)
        log.info("cordoned fenced node", extra={"node": node["metadata"]["name"]})
        return stored

    async def force_delete(self, pod: Obj, *, fence_name: str, agent: str) -> bool:
        """DisruptionTarget (DeletionByFencing), then delete with grace 0 and the pod's UID;
        True if this call removed it."""
        meta = pod["metadata"]
        ns, pod_name, uid = meta.get("namespace"), meta["name"], meta.get("uid")
        node_name = (pod.get("spec") or {}).get("nodeName")
        message = (f"Fence {fence_name} confirmed by the {agent} agent: the processes of "
                   f"node {node_name} are stopped")

        def mark(p: Obj) -> bool:
            if (p.get("spec") or {}).get("nodeName") != node_name:
                return False
            return set_condition(p, DISRUPTION_TARGET, "True", now=self.clock.now(),
                                 reason=REASON, message=message)

        if await update_pod_status(self.client, pod, mark) is None:
            return False  # gone already, or replaced by a pod with another UID
        try:
            await self.client.delete("pods", pod_name, ns, grace_period_seconds=0, uid=uid)
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return False
            raise
        log.warning("force deleted pod of a fenced node",
                    extra={"pod": f"{ns}/{pod_name}", "node": node_name})
        await self.recorder.event(pod, WARNING, "PodForceDeletedAfterFencing",
                                  f"{message}; force deleted the pod")
        return True

    async def retry_failed_fence(self, node: Obj, fence: Obj) -> float | None:
        """Warn, wait out the backoff, then delete the Fence so a fresh one is requested."""
        name, uid = str(fence["metadata"]["name"]), str(fence["metadata"].get("uid"))
        now = self.clock.monotonic()
        if uid not in self.failed_seen:
            self.failed_seen[uid] = now
            message = (fence.get("status") or {}).get("message") or "no message"
            await self.recorder.event(node, WARNING, "FencingFailed",
                                      f"Fence {name} failed: {message}; retrying in "
                                      f"{self.retry_backoff:g}s")
        left = self.failed_seen[uid] + self.retry_backoff - now
        if left > 0:
            return left
        try:
            await self.client.delete("fences", name, uid=uid)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
        self.failed_seen.pop(uid, None)
        log.info("deleted a failed fence to retry it", extra={"node": name})
        return None

    # -- unfence -------------------------------------------------------------------------

    async def lift_cordon(self, node: Obj) -> Obj:
        """No Fence any more: lift the fencing cordon (a no-op for an uncordoned node)."""
        updated = uncordoned(node, now=self.clock.now())
        if updated is None:
            return node
        try:
            stored = await self.client.update(updated)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return node
            raise
        name = node["metadata"]["name"]
        log.info("lifted the fencing cordon of an unfenced node", extra={"node": name})
        await self.recorder.event(stored, NORMAL, "NodeUnfenced",
                                  f"Fence {name} is gone: node {name} is schedulable again")
        return stored
