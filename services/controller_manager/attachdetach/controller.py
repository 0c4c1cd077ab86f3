"""The attach/detach controller (SPEC SC1): one node at a time holds a ReadWriteOnce volume.

Keys are volume names (`pvc-<claim uid>`). Attaching is creating the VolumeAttachment of
that name for the node of the oldest scheduled pod that uses the claim — the create is the
compare-and-swap, since a second one for the volume meets AlreadyExists — and then setting
its `status.attached`. While one node holds it, pods that want it elsewhere get a
FailedAttachVolume "Multi-Attach error" Event and wait. Detaching is deleting the
attachment with a UID precondition, and happens only when `plan.may_detach` says so: the
old pod object is gone from the API, or its node is confirmed fenced. Everything is
recomputed from the caches on each reconcile, so restarts and leader changes are safe.

Like Kubernetes' desired-state-of-the-world populator, a change of a node's Fence (or its
deletion, when the node is unfenced) re-queues every volume the node's pods use, not only
the attachments the node still holds: after a fenced node's volumes were detached, the
unfence is what lets them be attached again. A periodic resync
(`--attach-detach-reconcile-sync-period`) re-queues every exclusive volume, so a missed
event cannot strand a volume.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, BY_NODE_NAME, NORMAL, WARNING
from skiff.controller_manager.attachdetach.plan import (
    attachment,
    claim_names,
    fenced_nodes,
    is_exclusive,
    may_detach,
    node_of,
    plan_attach,
    pods_using,
    volume_name,
)
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)


def multi_attach_message(volume: str) -> str:
    return (f'Multi-Attach error for volume "{volume}" Volume is already exclusively '
            "attached to one node and can't be attached to another")


class AttachDetachController(Controller):
    name = "attachdetach"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_attach_detach_syncs,
                         resync_period=context.settings.attach_detach_reconcile_sync_period)
        self.pods = context.informers.pods()
        self.claims = context.informers.persistent_volume_claims()
        self.attachments = context.informers.volume_attachments()
        self.fences = context.informers.fences()
        self.recorder = context.recorder("attachdetach-controller")
        self.warned: set[tuple[str, str]] = set()  # (pod UID, holder) already told
        self.pods.add_handler(on_add=self._on_pod, on_update=self._on_pod_update,
                              on_delete=self._on_pod)
        self.claims.add_handler(on_add=self._on_claim,
                                on_update=lambda _o, n: self._on_claim(n),
                                on_delete=self._on_claim)
        self.attachments.add_handler(on_add=self._on_attachment,
                                     on_update=lambda _o, n: self._on_attachment(n),
                                     on_delete=self._on_attachment)
        self.fences.add_handler(on_add=self._on_fence, on_update=lambda _o, n: self._on_fence(n),
                                on_delete=self._on_fence)

    # -- handlers: map every change to the volumes it concerns ---------------------------

    def _on_pod(self, pod: Obj) -> None:
        ns = pod["metadata"].get("namespace")
        for name in claim_names(pod):
            claim = self.claims.store.get(f"{ns}/{name}")
            if claim is not None:
                self.enqueue(volume_name(claim))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(old)
        self._on_pod(new)

    def _on_claim(self, claim: Obj) -> None:
        self.enqueue(volume_name(claim))

    def _on_attachment(self, va: Obj) -> None:
        self.enqueue(str(va["metadata"]["name"]))

    def _on_fence(self, fence: Obj) -> None:
        """A Fence that changes or goes away concerns what the node holds and what its
        pods want: re-queue both (unfencing attaches the node's pods' volumes again)."""
        node_name = str((fence.get("spec") or {}).get("nodeName") or "")
        for va in self.attachments.store.list():
            if (va.get("spec") or {}).get("nodeName") == node_name:
                self.enqueue(str(va["metadata"]["name"]))
        if node_name:
            for pod in self.pods.store.by_index(BY_NODE_NAME, node_name):
                self._on_pod(pod)

    def resync(self) -> None:
        """Re-queue every exclusive volume: the reconciler's periodic pass over the
        desired state, so a missed event cannot strand a volume."""
        for claim in self.claims.store.list():
            if is_exclusive(claim):
                self.enqueue(volume_name(claim))
        for va in self.attachments.store.list():
            self.enqueue(str(va["metadata"]["name"]))

    def _claim(self, volume: str) -> Obj | None:
        return next((c for c in self.claims.store.list() if volume_name(c) == volume), None)

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        claim = self._claim(key)
        if claim is None or not is_exclusive(claim):
            return None  # a deleted claim's attachment stays: nothing proves it unused
        if not (claim.get("spec") or {}).get("volumeName"):
            return None  # not bound to a volume yet; the binding's update brings it back
        users = pods_using(claim, self.pods.store.by_index(
            BY_NAMESPACE, str(claim["metadata"].get("namespace"))))
        fences = self.fences.store.list()
        va = self.attachments.store.get(key)
        if va is not None and is_terminating(va):
            return None
        if va is not None:
            holder = str(va["spec"]["nodeName"])
            if may_detach(attached_to=holder, users=users, fenced=fenced_nodes(fences)):
                await self.detach(claim, va)
                return None
        else:
            holder = ""
        fencing = {str((f.get("spec") or {}).get("nodeName")) for f in fences}
        decided = plan_attach(attached_to=holder, users=users, fencing=fencing)
        if decided.node:
            await self.attach(claim, va, decided.node, users)
            for pod in decided.waiting:
                await self.warn_multi_attach(pod, key, decided.node)
        return None

    async def attach(self, claim: Obj, va: Obj | None, node_name: str,
                     users: list[Obj]) -> None:
        volume = volume_name(claim)
        if va is None:
            try:
                va = await self.client.create(attachment(claim, node_name))
            except ApiError as err:
                if err.reason == Reason.ALREADY_EXISTS:
                    return  # another node got it first; its add event brings us back
                raise
        if (va.get("status") or {}).get("attached"):
            return
        updated = copy.deepcopy(va)
        updated["status"] = {**(va.get("status") or {}), "attached": True}
        await self.client.update_status(updated)
        log.info("attached volume", extra={"volume": volume, "node": node_name})
        for pod in users:
            if node_of(pod) == node_name:
                await self.recorder.event(pod, NORMAL, "SuccessfulAttachVolume",
                                          f'AttachVolume.Attach succeeded for volume '
                                          f'"{volume}"')

    async def detach(self, claim: Obj, va: Obj) -> None:
        volume, holder = volume_name(claim), va["spec"]["nodeName"]
        try:
            await self.client.delete("volumeattachments", str(va["metadata"]["name"]),
                                     uid=va["metadata"].get("uid"))
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return
            raise
        log.info("detached volume", extra={"volume": volume, "node": holder})
        await self.recorder.event(claim, NORMAL, "SuccessfulDetachVolume",
                                  f'DetachVolume.Detach succeeded for volume "{volume}" '
                                  f"from node {holder}")

    async def warn_multi_attach(self, pod: Obj, volume: str, holder: str) -> None:
        key = (str(pod["metadata"].get("uid")), holder)
        if key in self.warned:
            return
        self.warned.add(key)
        await self.recorder.event(pod, WARNING, "FailedAttachVolume",
                                  multi_attach_message(volume))
