"""The node lifecycle controller (SPEC PS2): notices nodes whose kubelet went quiet.

Three loops, as in Kubernetes 1.32's node lifecycle controller:
- the monitor pass, every `node-monitor-period`: each node's Lease and Ready heartbeat are
  folded into a health record; no heartbeat for `node-monitor-grace-period` → its
  conditions go Unknown (NodeStatusUnknown, "Kubelet stopped posting node status.") and an
  Event NodeNotReady. The Ready status *observed before* this pass decides the node's
  NoExecute taint: a node not Ready joins its zone's tainting queue (or has the opposite
  lifecycle taint swapped at once), a Ready one loses both. Pods of a node that is not
  Ready are marked Ready=False. Then the zones' states are computed from the Ready
  statuses after the pass (`zones.handle_disruption`): they set each zone's tainting rate,
  and when every zone is fully disrupted all lifecycle NoExecute taints are removed;
- the tainting pass, every 100 ms: each zone's queue lets nodes through at its rate, and
  they get the `unreachable` / `not-ready` NoExecute taint;
- node events (the workqueue): the NoSchedule taints of the node's conditions and of
  `spec.unschedulable` (TaintNodesByCondition).
Evicting pods from NoExecute taints is the taint eviction controller's job, not this one's.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import BY_NODE_NAME, NORMAL, WARNING
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import NODE_LEASE_NAMESPACE
from skiff.controller_manager.nodelifecycle.health import (
    LIFECYCLE_TAINT_KEYS,
    NodeHealth,
    desired_no_schedule_taints,
    is_stale,
    mark_unknown,
    no_execute_key,
    observe,
    with_no_execute,
)
from skiff.controller_manager.nodelifecycle.zones import (
    EvictionRates,
    ZoneState,
    ZoneTainter,
    excluded_from_disruption,
    handle_disruption,
    zone_key,
)
from skiff.controller_manager.podutil import (
    NO_EXECUTE,
    condition_status,
    has_taint,
    is_pod_ready,
    same_taints,
    set_condition,
    taints_of,
    update_pod_status,
)

log = logging.getLogger(__name__)


NODE_EVICTION_PERIOD = 0.1  # Kubernetes' scheduler.NodeEvictionPeriod
TAINT_CONFLICT_RETRIES = 5  # as client-go's UpdateTaintBackoff steps


class NodeLifecycleController(Controller):
    name = "nodelifecycle"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=s.concurrent_node_syncs)
        self.monitor_period = s.node_monitor_period
        self.grace_period = s.node_monitor_grace_period
        self.startup_grace_period = s.node_startup_grace_period
        self.rates = EvictionRates(
            node_eviction_rate=s.node_eviction_rate,
            secondary_node_eviction_rate=s.secondary_node_eviction_rate,
            large_cluster_size_threshold=s.large_cluster_size_threshold,
            unhealthy_zone_threshold=s.unhealthy_zone_threshold)
        self.nodes = context.informers.nodes()
        self.leases = context.informers.node_leases()
        self.pods = context.informers.pods()
        self.recorder = context.recorder("node-controller")
        self.health: dict[str, NodeHealth] = {}
        self.zone_states: dict[str, ZoneState] = {}
        self.tainters: dict[str, ZoneTainter] = {}
        self.all_disrupted = False
        # Kubernetes' evictorLock: a tainting write and the disruption decisions never
        # interleave (a taint written while master disruption began would stay).
        self.evictor_lock = asyncio.Lock()
        self.nodes.add_handler(on_add=self._on_node, on_update=lambda _o, n: self._on_node(n))

    def _on_node(self, node: Obj) -> None:
        self.enqueue(str(node["metadata"]["name"]))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(super().run(), name=f"{self.name}-workers")
            tg.create_task(self._every(self.monitor_period, self.monitor_node_health),
                           name=f"{self.name}-monitor")
            tg.create_task(self._every(NODE_EVICTION_PERIOD, self.no_execute_tainting_pass),
                           name=f"{self.name}-tainting")

    async def _every(self, period: float, step: Callable[[], Awaitable[None]]) -> None:
        await self.context.informers.wait_synced()
        while True:
            try:
                await step()
            except Exception as err:
                log.warning("node lifecycle pass failed; retrying next period",
                            extra={"controller": self.name, "error": str(err)},
                            exc_info=not isinstance(err, ApiError))
            await self.clock.sleep(period)

    # -- node events: NoSchedule taints by condition ----------------------------------------

    async def reconcile(self, key: str) -> float | None:
        node = self.nodes.store.get(key)
        if node is None:
            return None
        want = desired_no_schedule_taints(node, now=self.clock.now())
        if not same_taints(want, taints_of(node)):
            await self.write_taints(node, want)
        return None

    # -- the monitor pass ---------------------------------------------------------------------

    async def monitor_node_health(self) -> None:
        nodes = self.nodes.store.list()
        names = {str(n["metadata"]["name"]) for n in nodes}
        for gone in set(self.health) - names:
            del self.health[gone]
        for node in nodes:
            self.tainter(zone_key(node))
        limit = asyncio.Semaphore(self.workers)

        async def one(node: Obj) -> tuple[Obj, str | None]:
            async with limit:
                try:
                    return node, await self.monitor_node(node)
                except ApiError as err:
                    log.warning("node health update failed; no pods will be evicted for it "
                                "this pass", extra={"node": node["metadata"]["name"],
                                                    "error": err.message})
                    return node, condition_status(node, "Ready")

        results = await asyncio.gather(*(one(n) for n in nodes))
        zones: dict[str, list[str | None]] = {}
        for node, ready in results:
            if not excluded_from_disruption(node):
                zones.setdefault(zone_key(node), []).append(ready)
        await self.apply_disruption(zones)

    async def monitor_node(self, node: Obj) -> str | None:
        """One node's health; returns its Ready status after the update."""
        key = str(node["metadata"]["name"])
        now = self.clock.monotonic()
        lease = self.leases.store.get(f"{NODE_LEASE_NAMESPACE}/{key}")
        health = self.health[key] = observe(self.health.get(key), node=node, lease=lease,
                                            now=now)
        observed = condition_status(node, "Ready")
        if is_stale(health, now=now, grace_period=self.grace_period,
                    startup_grace_period=self.startup_grace_period):
            node = await self.mark_node_unknown(node)
        await self.process_taint_based_eviction(node, observed)
        current = condition_status(node, "Ready")
        if current != "True":
            await self.mark_pods_not_ready(node)
        return current

    async def process_taint_based_eviction(self, node: Obj, observed: str | None) -> None:
        """`processTaintBaseEviction` with the Ready status seen before this pass."""
        name = str(node["metadata"]["name"])
        want = no_execute_key(observed)
        if observed == "True":
            async with self.evictor_lock:
                await self.mark_node_reachable(node)
            return
        if want is None:
            return
        opposite = any(t.get("effect") == NO_EXECUTE and t.get("key") != want
                       and t.get("key") in LIFECYCLE_TAINT_KEYS for t in taints_of(node))
        async with self.evictor_lock:
            if opposite:  # swap at once: the taints mirror the Ready condition
                await self.write_taints(node, with_no_execute(node, want,
                                                              now=self.clock.now()))
            elif not has_taint(node, want, NO_EXECUTE):
                self.tainter(zone_key(node)).add(name)

    async def mark_node_reachable(self, node: Obj) -> Obj:
        """`markNodeAsReachable`: no lifecycle NoExecute taint, not waiting for one. As
        Kubernetes' RemoveTaintOffNode, a Conflict (the informer's copy was stale: this
        controller itself just wrote the node's status) reads the node again and retries;
        entering master disruption happens once, so a lost write would leave the taint."""
        name = str(node["metadata"]["name"])
        self.tainter(zone_key(node)).remove(name)
        for _ in range(TAINT_CONFLICT_RETRIES):
            want = with_no_execute(node, None, now=self.clock.now())
            if same_taints(want, taints_of(node)):
                return node
            try:
                return await self.write_taints(node, want)
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
            try:
                node = await self.client.get("nodes", name)
            except ApiError as read_err:
                if read_err.reason == Reason.NOT_FOUND:
                    return node
                raise
        raise ApiError(Reason.CONFLICT, f"node {name} kept changing while its lifecycle "
                                        "taints were removed")

    async def apply_disruption(self, zones: dict[str, list[str | None]]) -> None:
        async with self.evictor_lock:
            await self._apply_disruption(zones)

    async def _apply_disruption(self, zones: dict[str, list[str | None]]) -> None:
        decision = handle_disruption(self.zone_states, zones, rates=self.rates)
        now = self.clock.monotonic()
        for zone, state in decision.states.items():
            if self.zone_states.get(zone) != state:
                log.info("zone is now in a new state", extra={"zone": zone or "(none)",
                                                             "state": str(state)})
        if decision.entering:
            log.warning("every node is not Ready: entering master disruption mode, "
                        "no NoExecute taints until a node is Ready again")
            for node in self.nodes.store.list():
                try:
                    await self.mark_node_reachable(node)
                except ApiError as err:
                    log.warning("failed to remove lifecycle taints", extra={
                        "node": node["metadata"]["name"], "error": err.message})
        if decision.leaving:
            log.info("some nodes are Ready: leaving master disruption mode")
            for name, health in self.health.items():
                self.health[name] = dataclasses.replace(health, probe_at=now)
        for zone, rate in decision.rates.items():
            self.tainter(zone).swap_rate(rate, now=now)
        self.zone_states = dict(decision.states)
        self.all_disrupted = decision.all_disrupted

    def tainter(self, zone: str) -> ZoneTainter:
        tainter = self.tainters.get(zone)
        if tainter is None:
            tainter = self.tainters[zone] = ZoneTainter(self.rates.node_eviction_rate,
                                                        now=self.clock.monotonic())
            self.zone_states.setdefault(zone, ZoneState.INITIAL)
        return tainter

    # -- the tainting pass ----------------------------------------------------------------------

    async def no_execute_tainting_pass(self) -> None:
        async with self.evictor_lock:
            await self._no_execute_tainting_pass()

    async def _no_execute_tainting_pass(self) -> None:
        now = self.clock.monotonic()
        for zone, tainter in list(self.tainters.items()):
            for name in tainter.due(now):
                node = self.nodes.store.get(name)
                if node is None:
                    continue
                want = no_execute_key(condition_status(node, "Ready"))
                if want is None:
                    continue  # Ready again meanwhile
                try:
                    await self.write_taints(node, with_no_execute(node, want,
                                                                  now=self.clock.now()))
                except ApiError as err:
                    log.warning("failed to taint node NoExecute; retrying", extra={
                        "node": name, "zone": zone, "error": err.message})
                    tainter.add(name)

    # -- writes ---------------------------------------------------------------------------------

    async def write_taints(self, node: Obj, want: list[Obj]) -> Obj:
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
        keys = {(t.get("key"), t.get("effect")) for t in have}
        kept = {(t.get("key"), t.get("effect")) for t in want}
        added = [f"{k}:{e}" for k, e in kept - keys]
        removed = [f"{k}:{e}" for k, e in keys - kept]
        log.info("updated node taints", extra={"node": name, "added": added,
                                               "removed": removed})
        return stored

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

