"""The scheduler service: informers feed the cache and the queue; one loop pops a pod,
runs a scheduling cycle, assumes the chosen node and binds in the background.

Recipe (Kubernetes' `scheduleOne`): skip pods that are gone or already assumed →
`schedule_pod` → on FitError run PostFilter (preemption), record the Unschedulable
condition, `nominatedNodeName` and a FailedScheduling event, and requeue → else assume the
pod in the cache and bind it through `pods/binding`, then record a Scheduled event; a
failed binding forgets the assumed pod and retries after backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from typing import Any

from skiff.api import ApiError, LabelSelector, Reason, is_pod_terminal
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.client import NORMAL, WARNING, Client, EventRecorder, Informer
from skiff.clock import REAL_CLOCK, Clock, rfc3339
from skiff.scheduler.algorithm import Algorithm, NoNodesAvailable
from skiff.scheduler.cache import Cache
from skiff.scheduler.config import SchedulerConfiguration
from skiff.scheduler.framework import ClusterEvent, Code, CycleState, FitError, Framework
from skiff.scheduler.framework.registry import Handle, build_framework
from skiff.scheduler.plugins import in_tree_registry
from skiff.scheduler.plugins.volumebinding import SELECTED_NODE, delayed_claims
from skiff.scheduler.podinfo import NodeFacts, PodInfo
from skiff.scheduler.preemption import DISRUPTION_TARGET, REASON_PREEMPTION_BY_SCHEDULER
from skiff.scheduler.queue import QueuedPodInfo, SchedulingQueue
from skiff.scheduler.settings import SchedulerSettings
from skiff.tracing import start_span_from_object, tracer

log = logging.getLogger("skiff.scheduler")


POD_SCHEDULED = "PodScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_SCHEDULING_GATED = "SchedulingGated"


def _node_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Only changes that can make a pod fit (not heartbeats or conditions)."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    o_st, n_st = old.get("status") or {}, new.get("status") or {}
    return (o_meta.get("labels") != n_meta.get("labels") or old.get("spec") != new.get("spec")
            or o_st.get("allocatable") != n_st.get("allocatable")
            or o_st.get("capacity") != n_st.get("capacity"))


def _set_condition(status: Obj, condition: Mapping[str, str], now: float) -> bool:
    """Set a pod condition like `podutil.UpdatePodCondition`; False when unchanged."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    for existing in conditions:
        if existing.get("type") == condition["type"]:
            if all(existing.get(k) == v for k, v in condition.items()):
                return False
            if existing.get("status") != condition["status"]:
                existing["lastTransitionTime"] = rfc3339(now)
            existing.update(condition)
            existing["lastProbeTime"] = None
            return True
    conditions.append({**condition, "lastProbeTime": None,
                       "lastTransitionTime": rfc3339(now)})
    return True


class Scheduler:
    """`await Scheduler(...).run(stop)`; everything it reads comes from its informers."""

    def __init__(self, *, client: Client, settings: SchedulerSettings,
                 config: SchedulerConfiguration, clock: Clock = REAL_CLOCK,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.settings = settings
        self.config = config
        self.clock = clock
        self.cache = Cache()
        self.queue = SchedulingQueue(
            initial_backoff=settings.pod_initial_backoff_seconds,
            max_backoff=settings.pod_max_backoff_seconds,
            max_in_unschedulable=settings.pod_max_in_unschedulable_pods_duration,
            clock=clock, events_for=self._events_for, hint=self._worth_retrying)
        def informer(resource: str) -> Informer:
            return Informer(client, resource, coalesce=settings.coalesced_watches)

        self.pods = informer("pods")
        self.nodes = informer("nodes")
        self.pdbs = informer("poddisruptionbudgets")
        self.replica_sets = informer("replicasets")
        self.stateful_sets = informer("statefulsets")
        self.namespaces = informer("namespaces")
        self.claims = informer("persistentvolumeclaims")
        self.storage_classes = informer("storageclasses")
        self.recorder = EventRecorder(client, component="default-scheduler", clock=clock)
        self.rng = rng or random.Random()
        handle = Handle(cache=self.cache, nominator=self.queue.nominator, owners=self,
                        namespaces=self, claims=self, pdbs=self, actions=self, rng=self.rng,
                        now=clock.now)
        registry = in_tree_registry()
        self.profiles: dict[str, Framework] = {
            p.scheduler_name: build_framework(p, registry=registry, handle=handle,
                                              disable_preemption=config.disable_preemption)
            for p in config.profiles}
        percentage = settings.percentage_of_nodes_to_score
        if percentage == 0 and config.percentage_of_nodes_to_score is not None:
            percentage = config.percentage_of_nodes_to_score
        self.algorithm = Algorithm(cache=self.cache, percentage_of_nodes_to_score=percentage,
                                   rng=self.rng)
        self._tracer = tracer("skiff.scheduler")
        self._binds = asyncio.Semaphore(max(1, settings.parallel_binds))
        self._background: set[asyncio.Task[None]] = set()
        self._gated_reported: set[str] = set()
        self._wire_handlers()

    # -- listers for plugins (Handle) ------------------------------------------------------------

    def get_owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        informer = self.replica_sets if kind == "ReplicaSet" else self.stateful_sets
        return informer.store.get(f"{namespace}/{name}")

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        namespace = self.namespaces.store.get(name)
        if namespace is None:
            return None
        labels: Mapping[str, str] = (namespace.get("metadata") or {}).get("labels") or {}
        return labels

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset(str((ns.get("metadata") or {}).get("name") or "")
                         for ns in self.namespaces.store.list()
                         if selector.matches((ns.get("metadata") or {}).get("labels") or {}))

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.claims.store.get(f"{namespace}/{name}")

    def get_storage_class(self, name: str) -> Mapping[str, Any] | None:
        return self.storage_classes.store.get(name)

    def list_pdbs(self) -> list[Mapping[str, Any]]:
        return list(self.pdbs.store.list())

    def _worth_retrying(self, qpi: QueuedPodInfo, event: ClusterEvent, old: PodInfo | None,
                        new: PodInfo | None) -> bool:
        fwk = self.profiles.get(qpi.pod.scheduler_name)
        if fwk is None:
            return True
        return fwk.worth_retrying(qpi.unschedulable_plugins, event, qpi.pod, old, new)

    def _events_for(self, qpi: QueuedPodInfo) -> frozenset[ClusterEvent]:
        fwk = self.profiles.get(qpi.pod.scheduler_name)
        if fwk is None:
            return frozenset(ClusterEvent)
        return fwk.events_for(qpi.unschedulable_plugins)

    # -- informer handlers -----------------------------------------------------------------------

    def _responsible(self, pod: Mapping[str, Any]) -> bool:
        return str((pod.get("spec") or {}).get("schedulerName") or
                   "default-scheduler") in self.profiles

    def _wire_handlers(self) -> None:
        self.pods.add_handler(on_add=self._on_pod_add, on_update=self._on_pod_update,
                              on_delete=self._on_pod_delete)
        self.nodes.add_handler(on_add=self._on_node_add, on_update=self._on_node_update,
                               on_delete=self._on_node_delete)
        self.replica_sets.add_handler(
            on_add=lambda obj: self._move(ClusterEvent.OWNER_CHANGE),
            on_update=lambda old, new: self._move(ClusterEvent.OWNER_CHANGE))
        self.stateful_sets.add_handler(
            on_add=lambda obj: self._move(ClusterEvent.OWNER_CHANGE),
            on_update=lambda old, new: self._move(ClusterEvent.OWNER_CHANGE))
        self.claims.add_handler(
            on_add=lambda obj: self._move(ClusterEvent.PVC_CHANGE),
            on_update=lambda old, new: self._move(ClusterEvent.PVC_CHANGE),
            on_delete=lambda obj: self._move(ClusterEvent.PVC_CHANGE))
        self.storage_classes.add_handler(  # a claim's missing class appears
            on_add=lambda obj: self._move(ClusterEvent.STORAGE_CLASS_CHANGE),
            on_update=lambda old, new: self._move(ClusterEvent.STORAGE_CLASS_CHANGE))
        self.namespaces.add_handler(
            on_add=lambda obj: self._move(ClusterEvent.NAMESPACE_CHANGE),
            on_update=lambda old, new: self._on_namespace_update(old, new))

    def _on_namespace_update(self, old: Obj, new: Obj) -> None:
        if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get(
                "labels"):
            self._move(ClusterEvent.NAMESPACE_CHANGE)

    def _move(self, event: ClusterEvent, *, old: PodInfo | None = None,
              new: PodInfo | None = None) -> None:
        self.queue.move_all_to_active_or_backoff(event, old=old, new=new)

    def _on_pod_add(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            if is_pod_terminal(pod):
                return
            info = PodInfo.from_pod(pod)
            self.cache.add_pod(info)
            self.queue.delete(info.key)
            self._move(ClusterEvent.ASSIGNED_POD_ADD, new=info)
        elif self._responsible(pod) and not is_pod_terminal(pod):
            info = PodInfo.from_pod(pod)
            self.queue.add(info)
            self._report_gated(info)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        if (new.get("spec") or {}).get("nodeName"):
            info = PodInfo.from_pod(new)
            if not (old.get("spec") or {}).get("nodeName"):
                self.queue.delete(info.key)  # just bound
            if is_pod_terminal(new):
                removed = self.cache.remove_pod(info.key)
                if removed is not None:
                    self._move(ClusterEvent.ASSIGNED_POD_DELETE, old=removed)
                return
            previous = self.cache.pod(info.key)
            self.cache.update_pod(info)
            if not (old.get("spec") or {}).get("nodeName"):
                # Just bound: to the assigned-pod view this is a new pod (Kubernetes'
                # filtered informer calls OnAdd), which may satisfy others' affinity.
                self._move(ClusterEvent.ASSIGNED_POD_ADD, new=info)
                return
            o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
            if (o_meta.get("labels") != n_meta.get("labels")
                    or o_meta.get("deletionTimestamp") != n_meta.get("deletionTimestamp")):
                self._move(ClusterEvent.ASSIGNED_POD_UPDATE,
                           old=previous or PodInfo.from_pod(old), new=info)
        elif self._responsible(new):
            info = PodInfo.from_pod(new)
            if is_pod_terminal(new):
                self.queue.delete(info.key)
                return
            self.queue.update(old, info)
            self._report_gated(info)

    def _on_pod_delete(self, pod: Obj) -> None:
        key = PodInfo.from_pod(pod).key
        self._gated_reported.discard(key)
        removed = self.cache.remove_pod(key)  # also an assumed pod whose binding raced
        self.queue.delete(key)
        if removed is not None:
            self._move(ClusterEvent.ASSIGNED_POD_DELETE, old=removed)

    def _on_node_add(self, node: Obj) -> None:
        self.cache.add_node(NodeFacts.from_node(node))
        self._move(ClusterEvent.NODE_ADD)

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        self.cache.update_node(NodeFacts.from_node(new))
        if _node_changed(old, new):
            self._move(ClusterEvent.NODE_UPDATE)

    def _on_node_delete(self, node: Obj) -> None:
        self.cache.remove_node(str((node.get("metadata") or {}).get("name", "")))

    # -- run -------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, *, on_ready: Any = None) -> None:
        informers = (self.nodes, self.pods, self.pdbs, self.replica_sets, self.stateful_sets,
                     self.namespaces, self.claims, self.storage_classes)
        flush = min(1.0, self.settings.pod_initial_backoff_seconds)
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(i.run(), name=f"informer-{i.resource}")
                         for i in informers]
                synced: asyncio.Future[Any] = asyncio.gather(
                    *(i.wait_synced() for i in informers))
                stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
                await asyncio.wait([synced, stopping], return_when=asyncio.FIRST_COMPLETED)
                if not stop.is_set():
                    log.info("scheduler caches synced",
                             extra={"nodes": len(self.cache), "profiles": list(self.profiles)})
                    if on_ready is not None:
                        await on_ready()
                    tasks.append(tg.create_task(self.queue.run_flushers(backoff_period=flush),
                                                name="queue-flush"))
                    tasks.append(tg.create_task(self._scheduling_loop(), name="schedule"))
                    await stop.wait()
                stopping.cancel()
                synced.cancel()
                self.queue.close()
                for t in tasks:
                    t.cancel()
        finally:
            await self.drain()

    async def drain(self) -> None:
        """Let in-flight bindings and status writes finish (bounded by the client)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _scheduling_loop(self) -> None:
        while True:
            qpi = await self.queue.pop()
            if qpi is None:
                return
            try:
                await self.schedule_one(qpi)
            except Exception:
                log.exception("scheduling cycle failed", extra={"pod": qpi.key})
                self.queue.add_to_backoff(qpi)

    # -- one pod ---------------------------------------------------------------------------------

    def _skip(self, pod: PodInfo) -> bool:
        current = self.pods.store.get(pod.key)
        if current is None or (current.get("metadata") or {}).get("uid") != pod.uid:
            return True  # deleted (or replaced) while queued
        if pod.terminating or (current.get("spec") or {}).get("nodeName"):
            return True
        return self.cache.has_pod(pod.key)  # assumed and binding

    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        pod = qpi.pod
        fwk = self.profiles.get(pod.scheduler_name)
        if fwk is None or self._skip(pod):
            self.queue.done(pod.key)
            return
        cycle = self.queue.scheduling_cycle
        with start_span_from_object(self._tracer, "scheduler.schedule", pod.pod,
                                    attributes={"pod": pod.key}) as span:
            state = CycleState()
            try:
                result = self.algorithm.schedule_pod(fwk, state, pod)
            except FitError as fit:
                span.set_attribute("unschedulable", True)
                await self._handle_fit_error(qpi, fwk, state, fit, cycle)
                return
            except NoNodesAvailable as err:
                qpi.unschedulable_plugins = set()
                await self._handle_failure(qpi, str(err), cycle=cycle)
                return
            span.set_attribute("node", result.suggested_host)
            assumed = pod.with_node(result.suggested_host)
            self.cache.assume_pod(assumed)
            self.queue.nominator.delete_nominated(pod)
            self.queue.done(pod.key)
            await self._binds.acquire()
            self._spawn(self._bind(qpi, result.suggested_host), name=f"bind-{pod.key}")

    async def _handle_fit_error(self, qpi: QueuedPodInfo, fwk: Framework, state: CycleState,
                                fit: FitError, cycle: int) -> None:
        pod = qpi.pod
        nominated: str | None = None  # None: leave the nomination; "": clear it
        if fwk.has_post_filter_plugins:
            result, status = await fwk.run_post_filter(state, pod, fit.diagnosis.node_to_status)
            if status.code == Code.ERROR:
                log.warning("preemption failed", extra={"pod": pod.key, "error": status.message})
            elif status.message:
                fit.diagnosis.post_filter_msg = status.message
            if result is not None:
                nominated = result.nominated_node_name
        qpi.unschedulable_plugins = set(fit.diagnosis.unschedulable_plugins)
        await self._handle_failure(qpi, str(fit), cycle=cycle, nominated=nominated)

    async def _handle_failure(self, qpi: QueuedPodInfo, message: str, *, cycle: int,
                              nominated: str | None = None,
                              reason: str = REASON_UNSCHEDULABLE) -> None:
        """Requeue the pod, record why, and set or clear (`nominated == ""`) its
        nominated node; None leaves the nomination as it is."""
        pod = qpi.pod
        current = self.pods.store.get(pod.key)
        if current is None or (current.get("spec") or {}).get("nodeName"):
            self.queue.done(pod.key)
            return
        if reason == REASON_UNSCHEDULABLE:
            self.queue.add_unschedulable_if_not_present(qpi, cycle)
        else:
            self.queue.add_to_backoff(qpi)
        if nominated:
            self.queue.nominator.add_nominated(pod, nominated)
        elif nominated == "":
            # Evaluator.Preempt found no candidate: the old nomination is stale.
            self.queue.nominator.delete_nominated(pod)
        log.info("pod is unschedulable", extra={"pod": pod.key, "why": message,
                                                  "nominatedNode": nominated})
        await self.recorder.event(dict(current), WARNING, "FailedScheduling", message)
        await self.update_pod_status(
            pod, condition={"type": POD_SCHEDULED, "status": "False", "reason": reason,
                            "message": message},
            nominated_node_name=nominated)

    async def _bind(self, qpi: QueuedPodInfo, node_name: str) -> None:
        pod = qpi.pod
        try:
            with start_span_from_object(self._tracer, "scheduler.bind", pod.pod,
                                        attributes={"pod": pod.key, "node": node_name}):
                await self._select_node_for_claims(pod, node_name)
                await self.client.bind(pod.namespace, pod.name, node_name, uid=pod.uid)
        except ApiError as err:
            self.cache.forget_pod(pod.key)
            self._move(ClusterEvent.ASSIGNED_POD_DELETE)
            if err.reason != Reason.NOT_FOUND and self.pods.store.get(pod.key) is not None:
                await self._handle_failure(qpi, f"Binding rejected: {err.message}",
                                           cycle=self.queue.scheduling_cycle,
                                           reason=REASON_SCHEDULER_ERROR)
            return
        except Exception:
            self.cache.forget_pod(pod.key)
            self.queue.add_to_backoff(qpi)
            raise
        finally:
            self._binds.release()
        self.cache.finish_binding(pod.key)
        log.info("pod scheduled", extra={"pod": pod.key, "node": node_name})
        await self.recorder.event(dict(pod.pod), NORMAL, "Scheduled",
                                  f"Successfully assigned {pod.key} to {node_name}")

    # -- API writes ------------------------------------------------------------------------------

    async def _select_node_for_claims(self, pod: PodInfo, node_name: str) -> None:
        """VolumeBinding PreBind (SPEC AX4): name the chosen node on the pod's delayed
        (WaitForFirstConsumer) claims, so their volumes are provisioned for it."""
        for claim in delayed_claims(self, pod):
            updated = deep_copy(dict(claim))
            updated["metadata"].setdefault("annotations", {})[SELECTED_NODE] = node_name
            await self.client.update(updated)

    async def update_pod_status(self, pod: PodInfo, *, condition: Mapping[str, str] | None,
                                nominated_node_name: str | None = None) -> None:
        """Set a condition and/or `status.nominatedNodeName` ("" clears it), retrying
        conflicts from a fresh read; no write when nothing would change."""
        current: Mapping[str, Any] | None = self.pods.store.get(pod.key)
        for _ in range(5):
            if current is None or (current.get("metadata") or {}).get("uid") != pod.uid:
                return
            new = deep_copy(dict(current))
            status = new.setdefault("status", {})
            changed = False
            if condition is not None:
                changed |= _set_condition(status, condition, self.clock.now())
            if nominated_node_name is not None and (
                    status.get("nominatedNodeName") or "") != nominated_node_name:
                if nominated_node_name:
                    status["nominatedNodeName"] = nominated_node_name
                else:
                    status.pop("nominatedNodeName", None)
                changed = True
            if not changed:
                return
            try:
                await self.client.update_status(new)
                return
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                if err.reason != Reason.CONFLICT:
                    log.warning("could not update pod status",
                                extra={"pod": pod.key, "error": err.message})
                    return
            try:
                current = await self.client.get("pods", pod.name, pod.namespace)
            except ApiError:
                return

    async def preempt_victim(self, victim: PodInfo, *, preemptor: PodInfo,
                             node_name: str) -> None:
        """PP4: DisruptionTarget condition, then a graceful delete with the victim's own
        grace period, and a Preempted event."""
        fwk_name = preemptor.scheduler_name
        await self.update_pod_status(victim, condition={
            "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
            "message": f"{fwk_name}: preempting to accommodate a higher priority pod"})
        try:
            await self.client.delete("pods", victim.name, victim.namespace, uid=victim.uid)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
            return
        log.info("preempted pod", extra={"pod": victim.key, "preemptor": preemptor.key,
                                          "node": node_name})
        await self.recorder.event(dict(victim.pod), NORMAL, "Preempted",
                                  f"Preempted by pod {preemptor.uid} on node {node_name}")

    async def clear_nominated_node_name(self, pod: PodInfo) -> None:
        await self.update_pod_status(pod, condition=None, nominated_node_name="")

    def _report_gated(self, pod: PodInfo) -> None:
        """LC9: tell the user why a gated pod waits (Kubernetes' SchedulingGated)."""
        if not pod.scheduling_gates:
            self._gated_reported.discard(pod.key)
            return
        if pod.key in self._gated_reported:
            return
        self._gated_reported.add(pod.key)
        self._spawn(self.update_pod_status(pod, condition={
            "type": POD_SCHEDULED, "status": "False", "reason": REASON_SCHEDULING_GATED,
            "message": "Scheduling is blocked due to non-empty scheduling gates"}),
            name=f"gated-{pod.key}")
