"""The storage agent (SPEC FN2, SC1): revoke a node's volume attachments.

Fencing deletes every VolumeAttachment whose `spec.nodeName` is the node (each with a UID
precondition, so an attachment re-created meanwhile is not touched blindly) and confirms by
listing again that none is left. This is the step the pod-safety design describes as
"break the PVC/PV attach to node A": afterwards the attach/detach controller may attach the
volumes elsewhere.

What it guarantees, honestly, in local mode: the API no longer says the volume belongs to
the node, and a kubelet that can still reach the apiserver kills the pods using it (it
watches attachments) and starts no new ones. What it does NOT guarantee: a partitioned
kubelet never hears of the revocation, and processes already running keep their open
directories (`<volume-root>/pvc-<uid>` is a plain directory with no storage server to
firewall), so they may go on writing. Use it together with the power agent, or in the
compose cluster with the network agent, when the node may still be running.
"""

from __future__ import annotations

import asyncio
import time

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import Client
from skiff.fence_agent.agent import FenceError, FenceStatus

__all__ = ["StorageAgent"]


class StorageAgent:
    def __init__(self, *, api: Client, confirm_timeout: float = 10.0) -> None:
        self.api = api
        self.confirm_timeout = confirm_timeout

    async def _attachments(self, node: str) -> list[Obj]:
        items: list[Obj] = (await self.api.list("volumeattachments"))["items"]
        return [va for va in items if va.get("spec", {}).get("nodeName") == node
                and not va.get("metadata", {}).get("deletionTimestamp")]

    async def fence(self, node: str) -> str:
        revoked: list[str] = []
        deadline = time.monotonic() + self.confirm_timeout
        delay = 0.05
        try:
            while attachments := await self._attachments(node):
                if time.monotonic() > deadline:
                    raise FenceError(f"volume attachments of node {node} are still there "
                                     f"after {self.confirm_timeout:g}s: "
                                     f"{', '.join(va['metadata']['name'] for va in attachments)}")
                for va in attachments:
                    meta = va["metadata"]
                    try:
                        await self.api.delete("volumeattachments", meta["name"],
                                              uid=meta["uid"])
                        revoked.append(meta["name"])
                    except ApiError as err:
                        if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                            raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        except ApiError as err:
            raise FenceError(f"could not revoke the volume attachments of node {node}: "
                             f"{err.message}") from None
        if not revoked:
            return f"node {node} has no volume attachments"
        return f"revoked {len(revoked)} volume attachment(s) of node {node}: " + \
            ", ".join(revoked)

    async def unfence(self, node: str) -> str:
        return (f"nothing to restore on node {node}: the attach/detach controller attaches "
                "volumes again as its pods need them")

    async def status(self, node: str) -> FenceStatus:
        try:
            left = await self._attachments(node)
        except ApiError as err:
            return FenceStatus(fenced=False, message=f"cannot list volume attachments: "
                                                     f"{err.message}")
        if left:
            return FenceStatus(fenced=False, message=f"node {node} still has volume "
                               f"attachments: {', '.join(va['metadata']['name'] for va in left)}")
        return FenceStatus(fenced=True, message=f"node {node} has no volume attachments")
