"""The garbage collector (Kubernetes' pkg/controller/garbagecollector, in one controller).

It watches every kind that carries ownerReferences and keeps a graph from owner uid to
dependents. Three jobs, all from that graph plus a live read before anything is deleted:

- a dependent whose owners are all gone (checked against the apiserver, not only the cache)
  is deleted — background propagation; one whose owners are partly gone loses the dangling
  references;
- an owner marked for deletion with the `orphan` finalizer has itself removed from every
  dependent's ownerReferences, then loses the finalizer (`--cascade=orphan`);
- an owner with the `foregroundDeletion` finalizer has its dependents deleted (foreground
  again, so the whole tree goes bottom-up) and loses the finalizer once no dependent with
  `blockOwnerDeletion` remains (`--cascade=foreground`).
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason, lookup
from skiff.api.ownership import (
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    has_finalizer,
    owner_uids,
)
from skiff.api.types import Obj
from skiff.client import Informer, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.writes import try_update

log = logging.getLogger(__name__)


# The namespaced kinds whose objects are owned by (or own) others.
GC_RESOURCES = ("pods", "replicasets", "replicationcontrollers", "deployments", "statefulsets",
                "daemonsets",
                "controllerrevisions", "jobs", "services", "endpointslices", "configmaps",
                "secrets", "persistentvolumeclaims")

Node = tuple[str, str]  # (resource, namespace/name)


class GarbageCollector(Controller):
    name = "garbagecollector"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_garbage_collector_syncs,
                         resync_period=context.settings.gc_resync_period)
        self.informers: dict[str, Informer] = {}
        self._by_uid: dict[str, Node] = {}
        self._dependents: dict[str, set[Node]] = {}
        for resource in GC_RESOURCES:
            informer = context.informers.resource(resource)
            self.informers[resource] = informer
            informer.add_handler(
                on_add=lambda o, r=resource: self._observe(r, None, o),  # type: ignore[misc]
                on_update=lambda old, new, r=resource: self._observe(  # type: ignore[misc]
                    r, old, new),
                on_delete=lambda o, r=resource: self._forget(r, o))  # type: ignore[misc]

    # -- the graph -------------------------------------------------------------------------

    def _observe(self, resource: str, old: Obj | None, obj: Obj) -> None:
        node = (resource, object_key(obj))
        uid = str(obj["metadata"].get("uid", ""))
        self._by_uid[uid] = node
        for owner in owner_uids(old or {}):
            self._dependents.get(owner, set()).discard(node)
        for owner in owner_uids(obj):
            self._dependents.setdefault(owner, set()).add(node)
        self.enqueue(_item(node))

    def _forget(self, resource: str, obj: Obj) -> None:
        node = (resource, object_key(obj))
        uid = str(obj["metadata"].get("uid", ""))
        self._by_uid.pop(uid, None)
        for owner in owner_uids(obj):
            self._dependents.get(owner, set()).discard(node)
            owner_node = self._by_uid.get(owner)
            if owner_node is not None:
                self.enqueue(_item(owner_node))  # a foreground owner may be done now
        for dependent in self._dependents.get(uid, set()):
            self.enqueue(_item(dependent))

    def resync(self) -> None:
        for resource, informer in self.informers.items():
            for obj in informer.store.list():
                if obj["metadata"].get("ownerReferences") or obj["metadata"].get(
                        "deletionTimestamp"):
                    self.enqueue(_item((resource, object_key(obj))))

    def _cached(self, node: Node) -> Obj | None:
        return self.informers[node[0]].store.get(node[1])

    def dependents_of(self, uid: str) -> list[tuple[str, Obj]]:
        found = []
        for node in sorted(self._dependents.get(uid, set())):
            obj = self._cached(node)
            if obj is not None and uid in owner_uids(obj):
                found.append((node[0], obj))
        return found

    # -- reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        resource, _, obj_key = key.partition("|")
        obj = self._cached((resource, obj_key))
        if obj is None:
            return None
        if obj["metadata"].get("deletionTimestamp"):
            if has_finalizer(obj, ORPHAN_FINALIZER):
                await self.orphan_dependents(resource, obj)
                return None
            if has_finalizer(obj, FOREGROUND_FINALIZER):
                return await self.delete_dependents_first(resource, obj)
        if obj["metadata"].get("ownerReferences"):
            await self.collect_if_owners_gone(resource, obj)
        return None

    async def orphan_dependents(self, resource: str, owner: Obj) -> None:
        uid = str(owner["metadata"]["uid"])
        for dep_resource, dependent in self.dependents_of(uid):
            await self._drop_owner_refs(dep_resource, dependent, {uid})
        await self._remove_finalizer(resource, owner, ORPHAN_FINALIZER)

    async def delete_dependents_first(self, resource: str, owner: Obj) -> float | None:
        uid = str(owner["metadata"]["uid"])
        blocking = 0
        for dep_resource, dependent in self.dependents_of(uid):
            refs = [r for r in dependent["metadata"].get("ownerReferences") or []
                    if r.get("uid") == uid]
            if any(r.get("blockOwnerDeletion") for r in refs):
                blocking += 1
            if not dependent["metadata"].get("deletionTimestamp"):
                await self._delete(dep_resource, dependent, "Foreground")
        if blocking:
            return 5.0  # the dependents' deletions wake us; this is a safety net
        await self._remove_finalizer(resource, owner, FOREGROUND_FINALIZER)
        return None

    async def collect_if_owners_gone(self, resource: str, obj: Obj) -> None:
        meta = obj["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
        dangling: set[str] = set()
        waiting_for_dependents = False
        for ref in refs:
            owner = await self._owner(ref, meta.get("namespace"))
            if owner is None:
                dangling.add(str(ref.get("uid")))
            elif owner["metadata"].get("deletionTimestamp") and has_finalizer(
                    owner, FOREGROUND_FINALIZER):
                waiting_for_dependents = True
        if not dangling and not waiting_for_dependents:
            return
        solid = [r for r in refs if str(r.get("uid")) not in dangling]
        if not solid:
            await self._delete(resource, obj, "Background")
        elif waiting_for_dependents and all(
                self._foreground_deleting(str(r.get("uid"))) for r in solid):
            if not meta.get("deletionTimestamp"):
                await self._delete(resource, obj, "Foreground")
        elif dangling:
            await self._drop_owner_refs(resource, obj, dangling)

    def _foreground_deleting(self, uid: str) -> bool:
        node = self._by_uid.get(uid)
        owner = self._cached(node) if node else None
        return bool(owner and owner["metadata"].get("deletionTimestamp")
                    and has_finalizer(owner, FOREGROUND_FINALIZER))

    async def _owner(self, ref: Obj, namespace: str | None) -> Obj | None:
        """The owner a reference names, read live when the cache does not have it; None when
        it is gone or was replaced by another object of the same name (uid differs)."""
        node = self._by_uid.get(str(ref.get("uid")))
        if node is not None:
            cached = self._cached(node)
            if cached is not None:
                return cached
        try:
            info = lookup(str(ref.get("kind", "")))
        except ApiError:
            log.warning("ownerReference to an unknown kind; leaving the dependent alone",
                        extra={"kind": ref.get("kind"), "owner": ref.get("name")})
            return {"metadata": {"uid": ref.get("uid")}}
        try:
            live = await self.client.get(info.resource, str(ref.get("name")),
                                         namespace if info.namespaced else None)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
        return live if live["metadata"].get("uid") == ref.get("uid") else None

    # -- writes ----------------------------------------------------------------------------

    async def _delete(self, resource: str, obj: Obj, policy: str) -> None:
        meta = obj["metadata"]
        try:
            await self.client.delete(resource, meta["name"], meta.get("namespace"),
                                     uid=meta.get("uid"), propagation_policy=policy)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
            return
        log.info("garbage collected", extra={"resource": resource, "object": meta["name"],
                                             "namespace": meta.get("namespace"),
                                             "propagationPolicy": policy})

    async def _drop_owner_refs(self, resource: str, obj: Obj, uids: set[str]) -> None:
        meta = obj["metadata"]
        for _ in range(5):
            try:
                live = await self.client.get(resource, meta["name"], meta.get("namespace"))
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                raise
            refs = live["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if str(r.get("uid")) not in uids]
            if len(kept) == len(refs):
                return
            updated = copy.deepcopy(live)
            if kept:
                updated["metadata"]["ownerReferences"] = kept
            else:
                updated["metadata"].pop("ownerReferences", None)
            if (await try_update(self.client, updated))[0]:
                return

    async def _remove_finalizer(self, resource: str, obj: Obj, finalizer: str) -> None:
        meta = obj["metadata"]
        for _ in range(5):
            try:
                live = await self.client.get(resource, meta["name"], meta.get("namespace"))
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                raise
            if live["metadata"].get("uid") != meta.get("uid") or not has_finalizer(
                    live, finalizer):
                return
            updated = copy.deepcopy(live)
            updated["metadata"]["finalizers"] = [
                f for f in live["metadata"].get("finalizers") or [] if f != finalizer]
            if (await try_update(self.client, updated))[0]:
                return


def _item(node: Node) -> str:
    return f"{node[0]}|{node[1]}"
