"""Pod creation and deletion with expectations, shared by the ReplicaSet, DaemonSet and Job
controllers (Kubernetes' `PodControl` + `ControllerExpectations` as every workload
controller uses them).

`PodControl` owns a controller's expectations: its pod handlers lower them as creations and
deletions are observed and enqueue the owning object (and, for an orphan pod, every object
of the kind whose selector matches it, so it can be adopted); `create` makes pods in
slow-start batches (1, 2, 4, …, stopping at the first error) and `delete` deletes pods
gracefully, both recording SuccessfulCreate / FailedCreate / SuccessfulDelete / FailedDelete
Events on the owner and lowering the expectations for what did not happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.client import NORMAL, WARNING, EventRecorder, Informer, object_key
from skiff.controller_manager.controller import Controller
from skiff.controller_manager.expectations import Expectations, slow_start_batches
from skiff.controller_manager.refmanager import orphan_owner_keys
from skiff.controller_manager.workload import owner_key


class PodControl:
    """Creates and deletes the pods of one kind of workload, keeping its expectations."""

    def __init__(self, controller: Controller, *, kind: str, recorder: EventRecorder,
                 pods: Informer, owners: Informer | None = None) -> None:
        self.controller = controller
        self.kind = kind
        self.recorder = recorder
        self.owners = owners
        self.expectations = Expectations(clock=controller.clock)
        pods.add_handler(on_add=self.on_pod_add, on_update=self.on_pod_update,
                         on_delete=self.on_pod_delete)

    # -- informer handlers -------------------------------------------------------------------

    def _enqueue_matching_owners(self, pod: Obj) -> None:
        """An orphan pod: wake every owner whose selector matches it (it may adopt it)."""
        if self.owners is not None:
            for key in orphan_owner_keys(self.owners, pod):
                self.controller.enqueue(key)

    def on_pod_add(self, pod: Obj) -> None:
        key = owner_key(pod, self.kind)
        if key is None:
            self._enqueue_matching_owners(pod)
            return
        self.expectations.creation_observed(key)
        self.controller.enqueue(key)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        key = owner_key(new, self.kind)
        if key is not None and is_terminating(new) and not is_terminating(old):
            self.expectations.deletion_observed(key, object_key(new))
        for k in {key, owner_key(old, self.kind)}:
            if k is not None:
                self.controller.enqueue(k)
        if key is None:
            self._enqueue_matching_owners(new)

    def on_pod_delete(self, pod: Obj) -> None:
        key = owner_key(pod, self.kind)
        if key is not None:
            self.expectations.deletion_observed(key, object_key(pod))
            self.controller.enqueue(key)

    # -- writes ------------------------------------------------------------------------------

    async def create(self, owner: Obj, key: str, pods: list[Obj]) -> None:
        """Create `pods` (built by the caller) for `owner`, in slow-start batches."""
        if not pods:
            return
        self.expectations.expect(key, adds=len(pods))
        done = 0
        for batch in slow_start_batches(len(pods)):
            results = await asyncio.gather(
                *(self._create_one(owner, pod) for pod in pods[done:done + batch]),
                return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            done += batch
            if errors:
                self.expectations.lower(key, adds=len(errors) + (len(pods) - done))
                raise errors[0]

    async def _create_one(self, owner: Obj, pod: Obj) -> None:
        try:
            created = await self.controller.client.create(pod)
        except ApiError as err:
            await self.recorder.event(owner, WARNING, "FailedCreate",
                                      f"Error creating: {err.message}")
            raise
        await self.recorder.event(owner, NORMAL, "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}")

    async def delete(self, owner: Obj, key: str, victims: list[Obj],
                     on_deleted: Callable[[Obj], None] | None = None) -> None:
        """Delete `victims` gracefully (each by UID); a pod already gone is not an error."""
        if not victims:
            return
        self.expectations.expect(key, deletes={object_key(p) for p in victims})
        for pod in victims:
            meta = pod["metadata"]
            try:
                await self.controller.client.delete("pods", meta["name"], meta.get("namespace"),
                                                    uid=meta.get("uid"))
            except ApiError as err:
                self.expectations.lower(key, deleted=object_key(pod))
                if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                    continue
                await self.recorder.event(owner, WARNING, "FailedDelete",
                                          f"Error deleting: {err.message}")
                raise
            if on_deleted is not None:
                on_deleted(pod)
            await self.recorder.event(owner, NORMAL, "SuccessfulDelete",
                                      f"Deleted pod: {meta['name']}")
