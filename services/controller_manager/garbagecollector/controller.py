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

Custom resources take part as owners and as dependents (SPEC EX2): as kube's graph builder
starts a monitor for each deletable resource discovery shows, this one starts an informer
for each custom kind while its CRD is established and stops it when the CRD goes. An
ownerReference is resolved by its apiVersion and kind (two CRDs may share a kind name).
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict

from skiff.api import ApiError, Reason
from skiff.api.kinds import KindInfo, lookup, lookup_kind
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

Node = tuple[str, str]  # (resource, namespace/name); a custom resource by its `ref`
# Owners seen deleted, remembered (kube's absentOwnerCache) so that their dependents are
# still collected when the owner's kind stops being served right after (a CRD deleted).
ABSENT_OWNERS = 1024
# Live lists of kinds whose informer lagged behind a deleting owner, kept for the owners
# marked before them (see `_owned_live`).
LIVE_LISTS = 64


class GarbageCollector(Controller):
    name = "garbagecollector"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_garbage_collector_syncs,
                         resync_period=context.settings.gc_resync_period)
        self.informers: dict[str, Informer] = {}
        self._by_uid: dict[str, Node] = {}
        self._dependents: dict[str, set[Node]] = {}
        self._absent: OrderedDict[str, None] = OrderedDict()
        self._live: OrderedDict[tuple[str, str | None],
                                tuple[int, dict[str, list[Obj]]]] = OrderedDict()
        for resource in GC_RESOURCES:
            self._track(resource, context.informers.resource(resource))
        context.informers.custom_kinds().subscribe(on_added=self.watch_kind,
                                                   on_removed=self.unwatch_kind)

    def _track(self, resource: str, informer: Informer) -> None:
        self.informers[resource] = informer
        informer.add_handler(
            on_add=lambda o: self._observe(resource, None, o),
            on_update=lambda old, new: self._observe(resource, old, new),
            on_delete=lambda o: self._forget(resource, o))

    # -- custom kinds (kube's graph builder: a monitor per deletable resource) -------------

    def watch_kind(self, info: KindInfo) -> None:
        """Follow the objects of a custom kind that is served now."""
        if info.ref in self.informers:
            return
        log.info("garbage collector watching a custom resource", extra={"resource": info.ref})
        self._track(info.ref, self.context.informers.dynamic(info.ref))

    def unwatch_kind(self, info: KindInfo, deleted: bool) -> None:
        """Stop following a custom kind no longer served. When its CRD was deleted, every
        object of it is gone (the apiserver deleted them first), even those whose deletion
        the informer had not delivered yet: their dependents are collected. Otherwise its
        objects only leave the graph, and their dependents stay (as kube leaves them)."""
        informer = self.informers.pop(info.ref, None)
        if informer is None:
            return
        self.context.informers.release(info.ref)
        for obj in informer.store.list():
            if deleted:
                self._forget(info.ref, obj)
            else:
                # Its dependents still name it: their edges stay, for when it is served again
                # (a foreground deletion then waits for them).
                self._unlink(info.ref, obj)

    # -- the graph -------------------------------------------------------------------------

    def _observe(self, resource: str, old: Obj | None, obj: Obj) -> None:
        node = (resource, object_key(obj))
        uid = str(obj["metadata"].get("uid", ""))
        self._by_uid[uid] = node
        for owner in owner_uids(old or {}):
            siblings = self._dependents.get(owner)
            if siblings is not None:
                siblings.discard(node)
                if not siblings:
                    del self._dependents[owner]
        for owner in owner_uids(obj):
            self._dependents.setdefault(owner, set()).add(node)
        self.enqueue(_item(node))

    def _forget(self, resource: str, obj: Obj) -> None:
        """The object was deleted: its owners may be done, its dependents may go."""
        uid = str(obj["metadata"].get("uid", ""))
        for owner in owner_uids(obj):
            owner_node = self._by_uid.get(owner)
            if owner_node is not None:
                self.enqueue(_item(owner_node))  # a foreground owner may be done now
        self._unlink(resource, obj)
        dependents = self._dependents.pop(uid, set())
        if dependents:
            self._absent[uid] = None
            while len(self._absent) > ABSENT_OWNERS:
                self._absent.popitem(last=False)
        for dependent in dependents:
            self.enqueue(_item(dependent))

    def _unlink(self, resource: str, obj: Obj) -> None:
        """Take the object out of the graph: its node and its edges to its owners. The
        edges to it from its dependents are theirs, and stay while they name it."""
        node = (resource, object_key(obj))
        uid = str(obj["metadata"].get("uid", ""))
        if self._by_uid.get(uid) == node:
            del self._by_uid[uid]
        for owner in owner_uids(obj):
            siblings = self._dependents.get(owner)
            if siblings is not None:
                siblings.discard(node)
                if not siblings:
                    del self._dependents[owner]

    def resync(self) -> None:
        for resource, informer in self.informers.items():
            for obj in informer.store.list():
                if obj["metadata"].get("ownerReferences") or obj["metadata"].get(
                        "deletionTimestamp"):
                    self.enqueue(_item((resource, object_key(obj))))

    def _cached(self, node: Node) -> Obj | None:
        informer = self.informers.get(node[0])
        return informer.store.get(node[1]) if informer is not None else None

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

    async def confirmed_dependents(self, owner: Obj) -> list[tuple[str, Obj]]:
        """The owner's dependents, from the graph and, for each kind whose informer has not
        yet seen the revision the owner's deletion was written at, from a live list.

        Each kind is its own watch: the owner's deletion can reach the graph before the
        creation of a dependent written just before it (kube's graph has the same window).
        Removing the orphan or foreground finalizer on the graph's word alone would then let
        the owner go first — the dependent of a foreground owner outliving it, or the
        dependent an orphaning owner should have kept collected as garbage."""
        uid = str(owner["metadata"]["uid"])
        revision = _revision_of(owner["metadata"].get("resourceVersion"))
        namespace = owner["metadata"].get("namespace")
        live: list[tuple[str, Obj]] = []
        for resource, informer in list(self.informers.items()):
            if informer.has_synced and _revision_of(informer.resource_version) >= revision:
                continue
            try:
                namespaced = lookup(resource).namespaced
            except ApiError:
                continue
            if namespace and not namespaced:
                continue  # a namespaced owner has no cluster-scoped dependents
            owned = await self._owned_live(resource, namespace if namespaced else None,
                                           revision)
            live.extend((resource, obj) for obj in owned.get(uid, ()))
        # The graph is read after the lists were awaited, not before: a kind whose informer
        # caught up meanwhile was skipped above on the graph's word, which must then include
        # what that informer delivered during the wait (CI saw the owner released early).
        found = self.dependents_of(uid)
        seen = {(r, object_key(o)) for r, o in found}
        found.extend(item for item in live if (item[0], object_key(item[1])) not in seen)
        return found

    async def _owned_live(self, resource: str, namespace: str | None,
                          revision: int) -> dict[str, list[Obj]]:
        """A live list of `resource` (in `namespace`) at `revision` or later, by owner uid.
        One list answers every owner marked before it was taken: a foreground Deployment's
        pods, each deleted in the foreground in turn, cost one list a kind, not one each.
        (Used only while the kind's informer is behind the owner: once it has caught up,
        the graph answers, so an object deleted after the list is never waited for.)"""
        key = (resource, namespace)
        cached = self._live.get(key)
        if cached is not None and cached[0] >= revision:
            return cached[1]
        listed = await self.client.list_pages(resource, namespace)
        owned: dict[str, list[Obj]] = {}
        for obj in listed["items"]:
            for owner in owner_uids(obj):
                owned.setdefault(owner, []).append(obj)
        self._live[key] = (_revision_of(listed["metadata"].get("resourceVersion")), owned)
        self._live.move_to_end(key)
        while len(self._live) > LIVE_LISTS:
            self._live.popitem(last=False)
        return owned

    async def orphan_dependents(self, resource: str, owner: Obj) -> None:
        uid = str(owner["metadata"]["uid"])
        for dep_resource, dependent in await self.confirmed_dependents(owner):
            await self._drop_owner_refs(dep_resource, dependent, {uid})
        await self._remove_finalizer(resource, owner, ORPHAN_FINALIZER)

    async def delete_dependents_first(self, resource: str, owner: Obj) -> float | None:
        uid = str(owner["metadata"]["uid"])
        blocking = 0
        for dep_resource, dependent in await self.confirmed_dependents(owner):
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
        it is gone or was replaced by another object of the same name (uid differs). An
        owner whose kind is not served (or a namespaced owner of a cluster-scoped
        dependent, which kube cannot resolve either) is presumed present: the dependent is
        left alone."""
        uid = str(ref.get("uid"))
        node = self._by_uid.get(uid)
        if node is not None:
            cached = self._cached(node)
            if cached is not None:
                return cached
        if uid in self._absent:
            return None
        present: Obj = {"metadata": {"uid": ref.get("uid")}}
        try:
            info = lookup_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        except ApiError:
            log.warning("ownerReference to a kind not served; leaving the dependent alone",
                        extra={"apiVersion": ref.get("apiVersion"), "kind": ref.get("kind"),
                               "owner": ref.get("name")})
            return present
        if info.namespaced and not namespace:
            return present
        try:
            live = await self.client.get(info.ref, str(ref.get("name")),
                                         namespace if info.namespaced else None)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND and err.name:
                return None  # the object is gone
            if err.reason == Reason.NOT_FOUND:  # its kind is not served (there, or yet)
                return present
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


def _revision_of(text: object) -> int:
    try:
        return int(str(text))
    except ValueError:
        return 0


def _item(node: Node) -> str:
    return f"{node[0]}|{node[1]}"
