"""The ReplicaSet controller (SPEC PS4): keeps `spec.replicas` active pods.

Reconcile counts the set's active pods (terminating ones do not count, so a replacement is
created as soon as a pod starts terminating, even while the old one still runs); creates
the missing ones from the template in slow-start batches (generateName `<rs>-`) or deletes
the least valuable surplus gracefully; records SuccessfulCreate / SuccessfulDelete Events;
and writes `status`. Expectations keep it from acting twice before its cache catches up.
Pods are matched by their controller ownerReference UID (adoption of orphans is not done).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from skiff.api import ApiError, Reason, is_pod_terminal, is_terminating
from skiff.client import NORMAL, WARNING, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.expectations import Expectations
from skiff.controller_manager.informers import BY_CONTROLLER_UID
from skiff.controller_manager.podutil import available_in, is_available, is_pod_ready
from skiff.controller_manager.replicaset.plan import (
    active_pods,
    pods_to_delete,
    replica_diff,
    slow_start_batches,
)
from skiff.controller_manager.workload import (
    owned_pods,
    owner_key,
    pod_from_template,
    write_status_if_changed,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
KIND = "ReplicaSet"


class ReplicaSetController(Controller):
    name = "replicaset"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_replicaset_syncs)
        self.sets = context.informers.replica_sets()
        self.pods = context.informers.pods()
        self.recorder = context.recorder("replicaset-controller")
        self.expectations = Expectations(clock=context.clock)
        self.sets.add_handler(on_add=self._on_set, on_update=lambda _o, n: self._on_set(n),
                              on_delete=self._on_set)
        self.pods.add_handler(on_add=self._on_pod_add, on_update=self._on_pod_update,
                              on_delete=self._on_pod_delete)

    def _on_set(self, rs: Obj) -> None:
        self.enqueue(object_key(rs))

    def _on_pod_add(self, pod: Obj) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.expectations.creation_observed(key)
            self.enqueue(key)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        key = owner_key(new, KIND)
        if key is not None and is_terminating(new) and not is_terminating(old):
            self.expectations.deletion_observed(key, object_key(new))
        for k in {key, owner_key(old, KIND)}:
            if k is not None:
                self.enqueue(k)

    def _on_pod_delete(self, pod: Obj) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.enqueue(key)

    async def reconcile(self, key: str) -> float | None:
        rs = self.sets.store.get(key)
        if rs is None:
            self.expectations.forget(key)
            return None
        uid = str(rs["metadata"].get("uid"))
        pods = owned_pods(self.pods.store.by_index(BY_CONTROLLER_UID, uid), rs)
        active = active_pods(pods)
        if self.expectations.satisfied(key) and not is_terminating(rs):
            await self.manage_replicas(rs, key, active)
        return await self.update_status(rs, pods)

    async def manage_replicas(self, rs: Obj, key: str, active: list[Obj]) -> None:
        diff = replica_diff(replicas=int(rs["spec"].get("replicas", 1)), active=len(active))
        if diff > 0:
            await self.create_pods(rs, key, diff)
        elif diff < 0:
            await self.delete_pods(rs, key, pods_to_delete(active, -diff,
                                                           now=self.clock.now()))

    async def create_pods(self, rs: Obj, key: str, count: int) -> None:
        self.expectations.expect(key, adds=count)
        done = 0
        for batch in slow_start_batches(count):
            results = await asyncio.gather(*(self._create_one(rs) for _ in range(batch)),
                                           return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            done += batch
            if errors:
                self.expectations.lower(key, adds=len(errors) + (count - done))
                raise errors[0]

    async def _create_one(self, rs: Obj) -> None:
        pod = pod_from_template(rs)
        pod["metadata"]["generateName"] = f"{rs['metadata']['name']}-"
        try:
            created = await self.client.create(pod)
        except ApiError as err:
            await self.recorder.event(rs, WARNING, "FailedCreate",
                                      f"Error creating: {err.message}")
            raise
        await self.recorder.event(rs, NORMAL, "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}")

    async def delete_pods(self, rs: Obj, key: str, victims: list[Obj]) -> None:
        self.expectations.expect(key, deletes={object_key(p) for p in victims})
        for pod in victims:
            meta = pod["metadata"]
            try:
                await self.client.delete("pods", meta["name"], meta.get("namespace"),
                                         uid=meta.get("uid"))
            except ApiError as err:
                self.expectations.lower(key, deleted=object_key(pod))
                if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                    continue
                await self.recorder.event(rs, WARNING, "FailedDelete",
                                          f"Error deleting: {err.message}")
                raise
            await self.recorder.event(rs, NORMAL, "SuccessfulDelete",
                                      f"Deleted pod: {meta['name']}")

    async def update_status(self, rs: Obj, pods: list[Obj]) -> float | None:
        """Write the status; returns when to look again for a ready pod that becomes
        available (`minReadySeconds`)."""
        active = active_pods(pods)
        min_ready = int(rs["spec"].get("minReadySeconds") or 0)
        now = self.clock.now()
        labels = ((rs["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = [p for p in active if is_pod_ready(p)]
        status: Obj = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1 for p in active
                if all((p["metadata"].get("labels") or {}).get(k) == v
                       for k, v in labels.items())),
            "readyReplicas": len(ready),
            "availableReplicas": sum(1 for p in ready if is_available(
                p, min_ready_seconds=min_ready, now=now)),
            "terminatingReplicas": sum(1 for p in pods
                                       if is_terminating(p) and not is_pod_terminal(p)),
            "observedGeneration": int(rs["metadata"].get("generation") or 1),
        }
        await write_status_if_changed(self.client, rs, status)
        return available_in(ready, min_ready_seconds=min_ready, now=now)
