"""The CRD controller (SPEC EX1): kube's naming, establishing and finalizer controllers of
apiextensions-apiserver in one loop over the CustomResourceDefinitions this apiserver sees.

For each CRD: its names are checked against the other CRDs of its group (`NamesAccepted`);
an accepted one is served at once by this apiserver (its kinds registered in
`skiff.api.kinds`, its strategy in the registry: discovery, the REST paths, the gRPC front
and the watch cache follow) and reported `Established`. A CRD being deleted (the DELETE
added the `customresourcecleanup` finalizer) is reported `Terminating`, refuses new
objects, has every one of its objects deleted, and loses the finalizer when none is left,
so it goes; then its resource is no longer served.

Every apiserver runs this loop over its own watch cache, so a CRD created through one is
served by all; the status writes are idempotent, so several apiservers agree.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.apiextensions import crdversions as crds
from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import KindInfo, register_custom, unregister_custom
from skiff.api.types import Obj, ObjView
from skiff.apiserver.admission.webhook.client import HttpsCaller, ServiceResolver
from skiff.apiserver.apiextensions.conversion import CrdConverter
from skiff.apiserver.endpoints.openapi import schemas as openapi
from skiff.apiserver.registry.store import Registry
from skiff.apiserver.registry.strategies.crd import CLEANUP_FINALIZER
from skiff.apiserver.registry.strategies.customresource import CustomResourceStrategy
from skiff.clock import rfc3339

log = logging.getLogger(__name__)

RESOURCE = "customresourcedefinitions"


def _condition(kind: str, status: bool, reason: str, message: str,
               old: list[Any], now: str) -> Obj:
    previous = next((c for c in old if isinstance(c, dict) and c.get("type") == kind), None)
    value = "True" if status else "False"
    since = (previous.get("lastTransitionTime") if previous is not None
             and previous.get("status") == value else None) or now
    return {"type": kind, "status": value, "lastTransitionTime": since, "reason": reason,
            "message": message}


class CrdController:
    """Serves the CustomResourceDefinitions of one apiserver (see the module doc)."""

    def __init__(self, registry: Registry, *, cleanup_interval: float = 1.0) -> None:
        self.registry = registry
        self._caller = HttpsCaller(ServiceResolver(registry.storage))  # conversion webhooks
        self.cleanup_interval = cleanup_interval
        self._served: dict[str, KindInfo] = {}  # CRD name -> the stored version's info
        self._versions: dict[str, list[KindInfo]] = {}  # CRD name -> the served versions
        self._shapes: dict[str, Any] = {}  # CRD name -> what was published of it
        self._cleanups: dict[str, asyncio.Task[None]] = {}

    async def sync(self) -> str:
        """Serve every CRD stored now (before the apiserver serves requests); the
        resourceVersion to watch from."""
        listed = await self.registry.list(RESOURCE, None)
        names = set()
        for crd in listed["items"]:
            names.add(crd["metadata"]["name"])
            await self._apply(crd)
        for name in set(self._served) - names:
            self._unserve(name)
        return str(listed["metadata"]["resourceVersion"])

    async def run(self) -> None:
        """Follow the CRDs for ever (a compacted watch resyncs)."""
        try:
            while True:
                rv = await self.sync()
                try:
                    async for ev in self.registry.watch(RESOURCE, None, resource_version=rv):
                        if ev.type == "DELETED":
                            self._unserve(ev.object["metadata"]["name"])
                        elif ev.type in ("ADDED", "MODIFIED"):
                            await self._apply(ev.object)
                except ApiError as err:
                    if err.reason not in (Reason.GONE, Reason.SERVICE_UNAVAILABLE):
                        raise
                    await asyncio.sleep(self.cleanup_interval)
        finally:
            for task in self._cleanups.values():
                task.cancel()

    # -- one CRD ---------------------------------------------------------------------------

    def _conflict(self, crd: ObjView) -> str:
        """Why the CRD's names cannot be accepted ("" when they can)."""
        spec = crd.get("spec") or {}
        group, names = spec.get("group"), spec.get("names") or {}
        mine = {names.get("plural"), names.get("singular"), *(names.get("shortNames") or [])}
        for name, other in self._served.items():
            if name == crd["metadata"]["name"] or other.group != group:
                continue
            if other.resource in mine or other.singular in mine:
                return f'"{other.resource}" is already in use'
            if other.kind == names.get("kind"):
                return f'"{other.kind}" is already in use'
        return ""

    async def _apply(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        conflict = self._conflict(crd)
        if not conflict:
            self._serve(crd)
        elif name in self._served:
            self._unserve(name)
        await self._report(crd, conflict)
        if crd["metadata"].get("deletionTimestamp") and CLEANUP_FINALIZER in (
                crd["metadata"].get("finalizers") or []) and name not in self._cleanups:
            self._cleanups[name] = asyncio.create_task(self._cleanup(name),
                                                       name=f"crd-cleanup-{name}")

    def _serve(self, crd: ObjView) -> None:
        name = crd["metadata"]["name"]
        stored, served = kind_infos(crd)
        # Its strategy is made again for every change (a terminating CRD refuses creates);
        # the kind table and OpenAPI only when what they publish changed, since each change
        # there makes every apiserver front rebuild its discovery and OpenAPI documents.
        self.registry.strategies.set_custom(stored, CustomResourceStrategy(
            stored, crd, CrdConverter(crd, self._caller)))
        schemas = [crds.schema_of(crd, info.version) for info in served]
        shape = (stored, tuple(served), schemas)
        if self._shapes.get(name) == shape:
            return
        previous = self._served.get(name)
        if previous is not None and previous.ref != stored.ref:
            self._unserve(name)
            self.registry.strategies.set_custom(stored, CustomResourceStrategy(
                stored, crd, CrdConverter(crd, self._caller)))
        now_served = {info.api_version for info in served}
        for old in self._versions.get(name, []):
            if old.api_version not in now_served:
                openapi.set_custom_schema(old, None)
        register_custom(stored, served)
        for info, schema in zip(served, schemas, strict=True):  # kubectl explain, SSA (EX4)
            openapi.set_custom_schema(info, schema)
        self._served[name] = stored
        self._versions[name] = served
        self._shapes[name] = shape

    def _unserve(self, name: str) -> None:
        info = self._served.pop(name, None)
        if info is not None:
            unregister_custom(info.ref)
            self.registry.strategies.set_custom(info, None)
        for served in self._versions.pop(name, []):
            openapi.set_custom_schema(served, None)
        self._shapes.pop(name, None)

    async def _report(self, crd: Obj, conflict: str) -> None:
        """Write the conditions and accepted names the CRD should show, if they differ."""
        status = dict(crd.get("status") or {})
        old = list(status.get("conditions") or [])
        now = rfc3339(self.registry.clock.now())
        names = dict((crd.get("spec") or {}).get("names") or {})
        conditions = [
            _condition("NamesAccepted", not conflict,
                       "NoConflicts" if not conflict else "AlreadyInUse",
                       "no conflicts found" if not conflict else conflict, old, now),
            _condition("Established", not conflict,
                       "InitialNamesAccepted" if not conflict else "NotAccepted",
                       "the initial names have been accepted" if not conflict
                       else "not all names are accepted", old, now),
        ]
        if crd["metadata"].get("deletionTimestamp"):
            conditions.append(_condition("Terminating", True, "InstanceDeletionInProgress",
                                         "CustomResourceDefinition marked for deletion; "
                                         "deleting its objects", old, now))
        wanted = {**status, "conditions": conditions,
                  "acceptedNames": names if not conflict else status.get("acceptedNames", {})}
        if _without_times(wanted) == _without_times(status):
            return
        body = {**crd, "status": wanted}
        body["metadata"] = {k: v for k, v in crd["metadata"].items()
                            if k != "resourceVersion"}
        try:
            await self.registry.update(RESOURCE, None, body, subresource="status")
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                log.warning("could not report a CRD's conditions",
                            extra={"crd": crd["metadata"]["name"], "error": err.message})

    async def _cleanup(self, name: str) -> None:
        """Delete every object of a terminating CRD, then let the CRD go."""
        try:
            while not await self._cleanup_once(name):
                await asyncio.sleep(self.cleanup_interval)
        finally:
            self._cleanups.pop(name, None)

    async def _cleanup_once(self, name: str) -> bool:
        """One pass: delete what is left; True when nothing was and the CRD was let go."""
        try:
            info = self._served.get(name)
            if info is not None:
                listed = await self.registry.list(info.ref, None)
                for obj in listed["items"]:
                    if not obj["metadata"].get("deletionTimestamp"):
                        await self._delete(info, obj)
                if listed["items"]:
                    return False
            await self._release(name)
            return True
        except ApiError as err:
            log.warning("CRD cleanup will be retried", extra={"crd": name,
                                                              "error": err.message})
            return False

    async def _delete(self, info: KindInfo, obj: ObjView) -> None:
        try:
            await self.registry.delete(info.ref, obj["metadata"].get("namespace"),
                                       obj["metadata"]["name"])
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise

    async def _release(self, name: str) -> None:
        current = await self.registry.get_or_none(RESOURCE, None, name)
        if current is None:
            return
        finalizers = [f for f in current["metadata"].get("finalizers") or []
                      if f != CLEANUP_FINALIZER]
        body = {**current, "metadata": {**current["metadata"], "finalizers": finalizers}}
        await self.registry.update(RESOURCE, None, body)


def _without_times(status: ObjView) -> Obj:
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                  for c in status.get("conditions") or [] if isinstance(c, dict)]
    return {**status, "conditions": conditions}
