"""The node lifecycle controller (SPEC PS2): notices nodes whose kubelet went quiet.

Every `node-monitor-period` each node is reconciled from the caches: its Lease and Ready
heartbeat are folded into a health record; no heartbeat for `node-monitor-grace-period`
→ its conditions go Unknown (NodeStatusUnknown, "Kubelet stopped posting node status.")
and an Event NodeNotReady. The Ready condition then decides the lifecycle taints
(`unreachable` / `not-ready`, NoSchedule + NoExecute) and, while it is not True, the pods
on the node are marked Ready=False. A node that reports Ready again loses the taints.
Evicting pods from NoExecute taints is the taint eviction controller's job, not this one's.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from skiff.api import ApiError, Reason
from skiff.client import BY_NODE_NAME, NORMAL, WARNING
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import NODE_LEASE_NAMESPACE
from skiff.controller_manager.nodelifecycle.health import (
    NodeHealth,
    desired_taints,
    is_stale,
    mark_unknown,
    observe,
)
from skiff.controller_manager.podutil import (
    condition_status,
    is_pod_ready,
    same_taints,
    set_condition,
    taints_of,
    update_pod_status,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class NodeLifecycleController(Controller):
    name = "nodelifecycle"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=s.concurrent_node_syncs,
                         resync_period=s.node_monitor_period)
        self.grace_period = s.node_monitor_grace_period
        self.startup_grace_period = s.node_startup_grace_period
        self.nodes = context.informers.nodes()
        self.leases = context.informers.node_leases()
        self.pods = context.informers.pods()
        self.recorder = context.recorder("node-controller")
        self.health: dict[str, NodeHealth] = {}
        self.nodes.add_handler(on_add=self._on_node, on_update=lambda _o, n: self._on_node(n),
                               on_delete=self._on_node)

    def _on_node(self, node: Obj) -> None:
        self.enqueue(str(node["metadata"]["name"]))

    def resync(self) -> None:
        """The monitor pass: look at every node."""
        for key in self.nodes.store.keys():
            self.enqueue(key)

    async def reconcile(self, key: str) -> float | None:
        node = self.nodes.store.get(key)
        if node is None:
            self.health.pop(key, None)
            return None
        now = self.clock.monotonic()
        lease = self.leases.store.get(f"{NODE_LEASE_NAMESPACE}/{key}")
        health = self.health[key] = observe(self.health.get(key), node=node, lease=lease,
                                            now=now)
        if is_stale(health, now=now, grace_period=self.grace_period,
                    startup_grace_period=self.startup_grace_period):
            node = await self.mark_node_unknown(node)
        node = await self.update_taints(node)
        if condition_status(node, "Ready") != "True":
            await self.mark_pods_not_ready(node)
        return None

    async def mark_node_unknown(self, node: Obj) -> Obj:
        updated = mark_unknown(node, now=self.clock.now())
        if updated is None:
            return node
        stored = await self.client.update_status(updated)
        name = node["metadata"]["name"]
        log.warning("node stopped posting status; marked Unknown", extra={"node": name})
        await self.recorder.event(stored, NORMAL, "NodeNotReady",
                                  f"Node {name} status is now: NodeNotReady")
        return stored

    async def update_taints(self, node: Obj) -> Obj:
        want = desired_taints(node, now=self.clock.now())
        have = taints_of(node)
        if same_taints(want, have):
            return node
        updated = copy.deepcopy(node)
        updated.setdefault("spec", {})["taints"] = want
        try:
            stored = await self.client.update(updated)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return node
            raise
        name = node["metadata"]["name"]
        added = [f"{t['key']}:{t['effect']}" for t in want if t not in have]
        removed = [f"{t['key']}:{t['effect']}" for t in have if t not in want]
        log.info("updated node lifecycle taints",
                 extra={"node": name, "added": added, "removed": removed})
        if not added and removed and condition_status(stored, "Ready") == "True":
            await self.recorder.event(stored, NORMAL, "NodeReady",
                                      f"Node {name} status is now: NodeReady")
        return stored

    async def mark_pods_not_ready(self, node: Obj) -> None:
        """`MarkPodsNotReady`: Ready=False on every pod of a node that is not Ready."""
        name = node["metadata"]["name"]
        for pod in self.pods.store.by_index(BY_NODE_NAME, name):
            if not is_pod_ready(pod):
                continue

            def not_ready(p: Obj) -> bool:
                if (p.get("spec") or {}).get("nodeName") != name:
                    return False
                return set_condition(p, "Ready", "False", now=self.clock.now(),
                                     reason="NodeNotReady", message="Node is not ready")

            stored = await update_pod_status(self.client, pod, not_ready)
            if stored is not None:
                await self.recorder.event(stored, WARNING, "NodeNotReady", "Node is not ready")
