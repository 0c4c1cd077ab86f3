"""The node IPAM controller (Kubernetes' `nodeipam`, range allocator): every Node gets a
`spec.podCIDR`/`podCIDRs` from `--cluster-cidr`, one `/--node-cidr-mask-size` block each.

The kubelet addresses its pods' sandboxes from that block (SPEC SB1). A block a node
already holds is kept (it is set once, as in Kubernetes); a deleted node's block is freed.
When the cluster CIDR is full the node gets a `CIDRNotAvailable` event and is retried.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import WARNING
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.nodeipam.allocator import CidrSet, CidrSetFull

log = logging.getLogger(__name__)


FULL_RETRY = 30.0


def pod_cidrs_of(node: Obj) -> list[str]:
    spec = node.get("spec") or {}
    cidrs = [str(c) for c in spec.get("podCIDRs") or []]
    if not cidrs and spec.get("podCIDR"):
        cidrs = [str(spec["podCIDR"])]
    return cidrs


class NodeIpamController(Controller):
    name = "nodeipam"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=1)
        self.cidrs = CidrSet(s.cluster_cidr, s.node_cidr_mask_size)
        self.nodes = context.informers.nodes()
        self.recorder = context.recorder("cidrAllocator")
        self.nodes.add_handler(on_add=self._on_node,
                               on_update=lambda _o, n: self._on_node(n),
                               on_delete=self._on_delete)

    def _on_node(self, node: Obj) -> None:
        for cidr in pod_cidrs_of(node):
            self.cidrs.occupy(cidr)
        if not pod_cidrs_of(node):
            self.enqueue(str(node["metadata"]["name"]))

    def _on_delete(self, node: Obj) -> None:
        for cidr in pod_cidrs_of(node):
            self.cidrs.release(cidr)

    async def run(self) -> None:
        await self.context.informers.wait_synced()
        for node in self.nodes.store.list():  # everything held, before handing out more
            for cidr in pod_cidrs_of(node):
                self.cidrs.occupy(cidr)
        await super().run()

    async def reconcile(self, key: str) -> float | None:
        node = self.nodes.store.get(key)
        if node is None or pod_cidrs_of(node):
            return None
        try:
            cidr = self.cidrs.allocate_next()
        except CidrSetFull as err:
            await self.recorder.event(node, WARNING, "CIDRNotAvailable", str(err))
            return FULL_RETRY
        updated = copy.deepcopy(node)
        updated.setdefault("spec", {}).update({"podCIDR": cidr, "podCIDRs": [cidr]})
        try:
            await self.client.update(updated)
        except ApiError as err:
            self.cidrs.release(cidr)
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
        log.info("allocated a pod CIDR", extra={"node": key, "podCIDR": cidr})
        return None
