"""Adoption and release of dependents (Kubernetes' `ControllerRefManager`,
pkg/controller/controller_ref_manager.go).

A workload controller works on the objects it controls. `claim` decides, for each candidate
in the owner's namespace:
- controlled by another object: not ours, left alone;
- controlled by the owner: kept while it matches the owner's selector; otherwise released
  (the owner's reference is removed) unless the owner is being deleted;
- no controller: adopted (an ownerReference with `controller: true` added) when it matches
  the selector, neither it nor the owner is being deleted, and a fresh read of the owner
  from the apiserver (not the cache) shows the same UID, still not terminating.
Writes are read-modify-write with the object's resourceVersion, so an object that changed
meanwhile (another controller adopted it, its labels changed) is re-read and re-checked.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.selectors import LabelSelector, workload_selector
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, Client, Informer, object_key
from skiff.controller_manager.informers import controller_ref
from skiff.controller_manager.workload import owner_reference
from skiff.controller_manager.writes import try_update

RESOURCE_OF_KIND = {"ReplicaSet": "replicasets", "Deployment": "deployments",
                    "ReplicationController": "replicationcontrollers",
                    "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "Job": "jobs"}
ATTEMPTS = 5


def owner_selector(owner: Mapping[str, Any]) -> LabelSelector:
    """The owner's `spec.selector`; a missing or invalid one selects nothing."""
    try:
        return LabelSelector.from_dict(workload_selector(owner))
    except ApiError:
        return LabelSelector.none()


def selector_matches(owner: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = owner_selector(owner)
    return not selector.empty and selector.matches(labels)


def orphan_owner_keys(owners: Informer, obj: Mapping[str, Any]) -> list[str]:
    """Keys of the owners in `obj`'s namespace that could adopt it: it has no controller,
    is not being deleted, and their selector matches its labels."""
    if controller_ref(dict(obj)) is not None or is_terminating(obj):
        return []
    labels = obj["metadata"].get("labels") or {}
    return [object_key(owner) for owner in owners.store.by_index(
        BY_NAMESPACE, str(obj["metadata"].get("namespace"))) if selector_matches(owner, labels)]


def _owner_gone(owners: Informer, obj: Obj, ref: Mapping[str, Any]) -> bool:
    cached = owners.store.get(f"{obj['metadata'].get('namespace')}/{ref.get('name')}")
    return cached is None or str(cached["metadata"].get("uid")) != str(ref.get("uid"))


class RefManager:
    """Claims the objects of `resource` for one owner (one instance per reconcile)."""

    def __init__(self, client: Client, owner: Obj, resource: str, *,
                 finalizers: tuple[str, ...] = (),
                 member: Callable[[Obj], bool] | None = None) -> None:
        self.client = client
        self.owner = owner
        self.resource = resource
        self.finalizers = finalizers
        self.member = member
        self.selector = owner_selector(owner)
        self._can_adopt: bool | None = None

    @property
    def uid(self) -> str:
        return str(self.owner["metadata"].get("uid"))

    def _matches(self, obj: Obj) -> bool:
        if self.selector.empty:  # an empty selector would adopt everything: never
            return False
        if not self.selector.matches(obj["metadata"].get("labels") or {}):
            return False
        return self.member is None or self.member(obj)

    async def orphans(self, objects: list[Obj], owners: Informer) -> list[Obj]:
        """The orphans among `objects` (of the owner's namespace) as the apiserver has them
        now: those without a controller, and those the cache still shows controlled by an
        owner of this kind that `owners` (its informer) no longer has, re-read. A
        `--cascade=orphan` deletion ends only after the garbage collector removed the
        references, but the pod informer that carries those writes can lag the one that
        brings the owner re-created from the same manifest; without the re-read the new owner
        would ignore its orphans as "controlled by someone else" and create replacements."""
        found: list[Obj] = []
        for obj in objects:
            ref = controller_ref(obj)
            if ref is None:
                found.append(obj)
            elif (ref.get("kind") == self.owner.get("kind") and str(ref.get("uid")) != self.uid
                  and not is_terminating(obj) and self._matches(obj)
                  and _owner_gone(owners, obj, ref)):
                fresh = await self._read(obj)
                if fresh is not None and controller_ref(fresh) is None:
                    found.append(fresh)
        return found

    async def claim(self, candidates: list[Obj]) -> list[Obj]:
        """The candidates the owner controls after adoption and release."""
        namespace = self.owner["metadata"].get("namespace")
        claimed: list[Obj] = []
        for obj in candidates:
            if obj["metadata"].get("namespace") != namespace:
                continue
            ref = controller_ref(obj)
            if ref is not None:
                if str(ref.get("uid")) != self.uid:
                    continue
                if self._matches(obj) or is_terminating(self.owner):
                    claimed.append(obj)
                else:
                    await self.release(obj)
                continue
            if is_terminating(self.owner) or is_terminating(obj) or not self._matches(obj):
                continue
            adopted = await self.adopt(obj)
            if adopted is not None:
                claimed.append(adopted)
        return claimed

    async def can_adopt(self) -> bool:
        """`RecheckDeletionTimestamp`: the owner, read from the apiserver, is the same object
        and not being deleted. Asked once per claim."""
        if self._can_adopt is None:
            meta = self.owner["metadata"]
            kind = str(self.owner.get("kind"))
            try:
                fresh = await self.client.get(RESOURCE_OF_KIND.get(kind, kind.lower() + "s"),
                                              meta["name"], meta.get("namespace"))
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
                fresh = None
            self._can_adopt = (fresh is not None and str(fresh["metadata"].get("uid")) ==
                               self.uid and not is_terminating(fresh))
        return self._can_adopt

    async def adopt(self, obj: Obj) -> Obj | None:
        if not await self.can_adopt():
            return None
        current = copy.deepcopy(obj)
        for _ in range(ATTEMPTS):
            meta = current["metadata"]
            if controller_ref(current) is not None or is_terminating(current) or \
                    not self._matches(current) or meta.get("uid") != obj["metadata"].get("uid"):
                return None
            meta["ownerReferences"] = [
                r for r in meta.get("ownerReferences") or [] if r.get("uid") != self.uid
            ] + [owner_reference(self.owner)]
            if self.finalizers:
                meta["finalizers"] = list(meta.get("finalizers") or []) + [
                    f for f in self.finalizers if f not in (meta.get("finalizers") or [])]
            done, written = await try_update(self.client, current)
            if done:
                return written
            fresh = await self._read(obj)
            if fresh is None:
                return None
            current = fresh
        return None

    async def release(self, obj: Obj) -> None:
        """Remove the owner's reference from an object that no longer matches."""
        current: Obj | None = copy.deepcopy(obj)
        for _ in range(ATTEMPTS):
            if current is None or current["metadata"].get("uid") != obj["metadata"].get("uid"):
                return
            meta = current["metadata"]
            refs = meta.get("ownerReferences") or []
            if not any(r.get("uid") == self.uid for r in refs):
                return
            meta["ownerReferences"] = [r for r in refs if r.get("uid") != self.uid]
            if (await try_update(self.client, current))[0]:
                return
            current = await self._read(obj)

    async def _read(self, obj: Obj) -> Obj | None:
        meta = obj["metadata"]
        try:
            return await self.client.get(self.resource, meta["name"], meta.get("namespace"))
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise


async def claim_revisions(client: Client, owner: Obj, revisions: Informer) -> list[Obj]:
    """`claimHistory` of the DaemonSet and StatefulSet controllers: the owner's
    ControllerRevisions, after adopting orphans its selector matches (those a
    `--cascade=orphan` deletion of an earlier set with that selector left behind)."""
    uid = owner["metadata"].get("uid")
    candidates = [r for r in revisions.store.by_index(
        BY_NAMESPACE, str(owner["metadata"].get("namespace")))
        if (controller_ref(r) or {}).get("uid") in (uid, None)]
    return await RefManager(client, owner, "controllerrevisions").claim(candidates)


async def make_revision_newest(client: Client, revision: Obj, owned: list[Obj]) -> Obj:
    """Controller history's roll back (the StatefulSet controller's `UpdateControllerRevision`
    to `nextRevision`, the DaemonSet controller's `constructHistory`): when the template goes
    back to an earlier ControllerRevision, that revision is renumbered after every other one
    the owner has, so `kubectl rollout history` lists it last and the next `rollout undo`
    goes to the revision before it. Returns the revision as stored."""
    name = revision["metadata"]["name"]
    newest_other = max((int(r.get("revision") or 0) for r in owned
                        if r["metadata"]["name"] != name), default=0)
    current = revision
    for _ in range(ATTEMPTS):
        if int(current.get("revision") or 0) > newest_other:
            return current
        updated = copy.deepcopy(current)
        updated["revision"] = newest_other + 1
        written, stored = await try_update(client, updated)
        if written:
            return stored if stored is not None else current
        current = await client.get("controllerrevisions", name,
                                   revision["metadata"].get("namespace"))
    raise ApiError(Reason.CONFLICT, f"ControllerRevision {name} kept changing while it was "
                                    "renumbered as the newest revision; will retry")
