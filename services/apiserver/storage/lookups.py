"""In-memory copies of the few objects admission reads on every create.

Namespaces (is it there, is it terminating?) and PriorityClasses (resolve a name, find the
globalDefault) are read on every pod create, and so is the pod's ServiceAccount (keyed
`namespace/name`); Kubernetes' admission plugins read them from
informers rather than storage, and so does Skiff: each lookup is listed once and then fed
by the watch cache. A miss falls back to etcd, so an object created a millisecond ago is
never refused because the copy lags (NamespaceLifecycle does the same live lookup).
"""

from __future__ import annotations

import asyncio
import logging
import time

from skiff.api import ApiError, lookup
from skiff.api.kinds import storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.watchcache import WatchCache, WatchRequest

log = logging.getLogger(__name__)

LIVE_LOOKUP_TTL = 30.0


class Lookup:
    """name (`namespace/name` when namespaced) → object for one resource, kept current from
    the watch cache."""

    def __init__(self, resource: str, storage: Storage, cache: WatchCache) -> None:
        self.info = lookup(resource)
        self._storage = storage
        self._cache = cache
        self.items: dict[str, Obj] = {}
        self._synced = asyncio.Event()
        self._live: dict[str, tuple[float, list[Obj]]] = {}  # namespace -> (until, objects)

    async def run(self) -> None:
        while True:
            try:
                kvs, revision = await self._storage.list(storage_prefix(self.info))
                self.items = {self._key(kv.obj): kv.obj for kv in kvs if kv.obj}
                self._synced.set()
                request = WatchRequest(self.info, None, lambda _: True, selects_all=True)
                async for ev in self._cache.watch(request, revision):
                    if ev.type == "BOOKMARK":
                        continue
                    name = self._key(ev.object)
                    if ev.type == "DELETED":
                        self.items.pop(name, None)
                    else:
                        self.items[name] = ev.object
            except ApiError as err:
                log.warning("lookup resync", extra={"resource": self.info.resource,
                                                    "error": err.message})
                await asyncio.sleep(0.5)

    @property
    def synced(self) -> bool:
        """Whether the copy has been listed (`items` holds every object)."""
        return self._synced.is_set()

    def _key(self, obj: Obj) -> str:
        meta = obj["metadata"]
        if self.info.namespaced:
            return f"{meta.get('namespace') or ''}/{meta['name']}"
        return str(meta["name"])

    async def get(self, name: str) -> Obj | None:
        """The cached object, or a live read when the cache has not seen it (yet)."""
        if self._synced.is_set() and name in self.items:
            return self.items[name]
        kv, _ = await self._storage.get(f"{storage_prefix(self.info)}{name}")
        return kv.obj if kv is not None else None

    async def in_namespace(self, namespace: str) -> list[Obj]:
        """The namespace's objects from the copy; when it has none, a live list at most
        every LIVE_LOOKUP_TTL seconds per namespace (the liveLookupCache of Kubernetes'
        LimitRanger and ResourceQuota admission), so one created a moment ago is seen."""
        cached = [o for o in self.items.values() if o["metadata"].get("namespace") == namespace] \
            if self._synced.is_set() else []
        if cached:
            return cached
        now = time.monotonic()
        until, found = self._live.get(namespace, (0.0, []))
        if until < now:
            kvs, _ = await self._storage.list(storage_prefix(self.info, namespace))
            found = [kv.obj for kv in kvs if kv.obj]
            self._live[namespace] = (now + LIVE_LOOKUP_TTL, found)
        return found

    async def values(self) -> list[Obj]:
        if not self._synced.is_set():
            kvs, _ = await self._storage.list(storage_prefix(self.info))
            return [kv.obj for kv in kvs if kv.obj]
        return list(self.items.values())
