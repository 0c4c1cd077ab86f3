"""The ReplicaSet controller (SPEC PS4): keeps `spec.replicas` active pods.

Reconcile counts the set's active pods (terminating ones do not count, so a replacement is
created as soon as a pod starts terminating, even while the old one still runs); creates
the missing ones from the template in slow-start batches (generateName `<rs>-`) or deletes
the least valuable surplus gracefully; records SuccessfulCreate / SuccessfulDelete Events;
and writes `status`. Expectations keep it from acting twice before its cache catches up.
The set works on the pods it controls after `RefManager.claim`: active orphans matching its
selector are adopted, owned pods that no longer match are released.
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, object_key
from skiff.clock import rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import BY_CONTROLLER_UID
from skiff.controller_manager.podcontrol import PodControl
from skiff.controller_manager.podutil import available_in, is_available, is_pod_ready
from skiff.controller_manager.refmanager import RefManager
from skiff.controller_manager.replicaset.plan import (
    active_pods,
    pods_to_delete,
    replica_diff,
)
from skiff.controller_manager.workload import (
    owned_pods,
    pod_from_template,
    write_status_if_changed,
)

log = logging.getLogger(__name__)


class ReplicaSetController(Controller):
    name = "replicaset"
    kind = "ReplicaSet"
    resource = "replicasets"
    component = "replicaset-controller"  # the source of its Events

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_replicaset_syncs)
        self.sets = context.informers.resource(self.resource)
        self.pods = context.informers.pods()
        self.recorder = context.recorder(self.component)
        self.pod_control = PodControl(self, kind=self.kind, recorder=self.recorder,
                                      pods=self.pods, owners=self.sets)
        self.expectations = self.pod_control.expectations
        self.sets.add_handler(on_add=self._on_set, on_update=lambda _o, n: self._on_set(n),
                              on_delete=self._on_set)

    def _on_set(self, rs: Obj) -> None:
        self.enqueue(object_key(rs))

    async def reconcile(self, key: str) -> float | None:
        rs = self.sets.store.get(key)
        if rs is None:
            self.expectations.forget(key)
            return None
        uid = str(rs["metadata"].get("uid"))
        owned = owned_pods(self.pods.store.by_index(BY_CONTROLLER_UID, uid), rs)
        refs = RefManager(self.client, rs, "pods")
        orphans = await refs.orphans(active_pods(self.pods.store.by_index(
            BY_NAMESPACE, str(rs["metadata"].get("namespace")))), self.sets)
        pods = await refs.claim(owned + orphans)
        active = active_pods(pods)
        failure: ApiError | None = None
        if self.expectations.satisfied(key) and not is_terminating(rs):
            try:
                await self.manage_replicas(rs, key, active)
            except ApiError as err:  # the status says so (ReplicaFailure), then retry
                failure = err
        after = await self.update_status(rs, pods, failure)
        if failure is not None:
            raise failure
        return after

    async def manage_replicas(self, rs: Obj, key: str, active: list[Obj]) -> None:
        diff = replica_diff(replicas=int(rs["spec"].get("replicas", 1)), active=len(active))
        if diff > 0:
            await self.create_pods(rs, key, diff)
        elif diff < 0:
            await self.pod_control.delete(rs, key, pods_to_delete(active, -diff,
                                                                  now=self.clock.now()))

    async def create_pods(self, rs: Obj, key: str, count: int) -> None:
        pods = []
        for _ in range(count):
            pod = pod_from_template(rs)
            pod["metadata"]["generateName"] = f"{rs['metadata']['name']}-"
            pods.append(pod)
        await self.pod_control.create(rs, key, pods)

    async def update_status(self, rs: Obj, pods: list[Obj],
                            failure: ApiError | None = None) -> float | None:
        """Write the status; returns when to look again for a ready pod that becomes
        available (`minReadySeconds`). A failed create or delete sets the ReplicaFailure
        condition (FailedCreate: e.g. a pod refused by a ResourceQuota); a sync that
        succeeds removes it."""
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
            "conditions": _replica_failure(rs, len(active), failure, now) or None,
        }
        if self.kind == "ReplicationController":  # ReplicationControllerStatus has none
            del status["terminatingReplicas"]
        await write_status_if_changed(self.client, rs, status)
        return available_in(ready, min_ready_seconds=min_ready, now=now)


def _replica_failure(rs: Obj, active: int, failure: ApiError | None,
                     now: float) -> list[Obj]:
    """calculateStatus's ReplicaFailure: added (FailedCreate when pods were missing,
    FailedDelete when surplus) on the first failed sync, kept while syncs fail, removed
    by one that succeeds."""
    conditions = [dict(c) for c in (rs.get("status") or {}).get("conditions") or []]
    current = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if failure is not None and current is None:
        wanted = int(rs["spec"].get("replicas", 1))
        reason = "FailedCreate" if active < wanted else "FailedDelete"
        conditions.append({"type": "ReplicaFailure", "status": "True",
                           "lastTransitionTime": rfc3339(now), "reason": reason,
                           "message": failure.message})
    elif failure is None and current is not None:
        conditions.remove(current)
    return conditions


class ReplicationManager(ReplicaSetController):
    """The ReplicationController controller. Kubernetes runs its ReplicaSet controller over
    ReplicationControllers through an adapter (their selector is a label map, read as
    `matchLabels` by `skiff.api.selectors.workload_selector`); so does Skiff."""

    name = "replicationcontroller"
    kind = "ReplicationController"
    resource = "replicationcontrollers"
    component = "replication-controller"
