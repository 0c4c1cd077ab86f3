"""Informers: a local, indexed cache of one resource kept current by list + watch.

The reflector lists at revision R, then watches from R; every event moves its resource
version forward, so after an apiserver or etcd restart it resumes from exactly where it was
(no event lost or repeated). A compacted revision (Gone) makes it re-list and diff the new
list against its cache, telling handlers what changed in between. Handlers run on the
informer's task and must be quick: controllers only enqueue keys from them.

`keep` narrows what the cache holds beyond what a label or field selector can say (a
process serving many hollow nodes keeps only its own nodes' pods): an object it refuses is
not stored and its events reach no handler, and one that stops being kept leaves the cache
as a deletion — what the apiserver does for an object that leaves a watch's selector.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable
from dataclasses import dataclass

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.interface import Client, WatchEvent

log = logging.getLogger(__name__)

IndexFunc = Callable[[Obj], list[str]]

BY_NAMESPACE = "namespace"
BY_NODE_NAME = "nodeName"


def object_key(obj: Obj) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKey)."""
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def index_by_namespace(obj: Obj) -> list[str]:
    ns = obj.get("metadata", {}).get("namespace")
    return [ns] if ns else []


def index_by_node_name(obj: Obj) -> list[str]:
    node = obj.get("spec", {}).get("nodeName")
    return [node] if node else []


class Indexer:
    """Objects by key plus secondary indexes. Readers must not mutate what they get."""

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers = dict(indexers or {})
        self._indexes: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list(self) -> builtins.list[Obj]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        keys = self._indexes[index].get(value, set())
        return [self._items[k] for k in keys]

    def put(self, obj: Obj) -> Obj | None:
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name, fn in self._indexers.items():
            for value in fn(obj):
                self._indexes[name].setdefault(value, set()).add(key)
        return old

    def remove(self, obj: Obj) -> Obj | None:
        key = object_key(obj)
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, fn in self._indexers.items():
            for value in fn(obj):
                bucket = self._indexes[name].get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del self._indexes[name][value]


@dataclass
class _Handler:
    on_add: Callable[[Obj], None] | None
    on_update: Callable[[Obj, Obj], None] | None
    on_delete: Callable[[Obj], None] | None


class Informer:
    """List + watch one resource into an `Indexer`; `run()` until cancelled."""

    def __init__(self, client: Client, resource: str, *, namespace: str | None = None,
                 label_selector: str = "", field_selector: str = "",
                 indexers: dict[str, IndexFunc] | None = None,
                 resync_period: float | None = None, backoff_initial: float = 0.1,
                 backoff_max: float = 5.0, watch_idle_timeout: float = 60.0,
                 keep: Callable[[Obj], bool] | None = None, coalesce: bool = False) -> None:
        self.client = client
        self.keep = keep
        self.coalesce = coalesce  # a watcher that may lag a busy stream's tick (Client.watch)
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Indexer(indexers)
        self.resource_version = ""
        self.resync_period = resync_period
        self._handlers: list[_Handler] = []
        self._synced = asyncio.Event()
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        # The apiserver sends a BOOKMARK every few seconds while the cluster changes; a
        # stream silent for this long is presumed dead (e.g. cut by a partition) and resumed.
        self.watch_idle_timeout = watch_idle_timeout
        self.relists = 0

    def add_handler(self, *, on_add: Callable[[Obj], None] | None = None,
                    on_update: Callable[[Obj, Obj], None] | None = None,
                    on_delete: Callable[[Obj], None] | None = None) -> None:
        self._handlers.append(_Handler(on_add, on_update, on_delete))

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self._synced.wait()

    async def run(self) -> None:
        resync = (asyncio.create_task(self._resync_loop(), name=f"resync-{self.resource}")
                  if self.resync_period else None)
        delay = self._backoff_initial
        need_list = True
        try:
            while True:
                try:
                    if need_list:
                        await self._list()
                        need_list = False
                    await self._watch()
                    delay = self._backoff_initial  # stream closed by the server: resume
                    continue
                except ApiError as err:
                    if err.reason == Reason.GONE:
                        log.info("watch expired; re-listing",
                                 extra={"resource": self.resource, "error": err.message})
                        need_list = True
                        continue
                    log.warning("watch failed; retrying",
                                extra={"resource": self.resource, "error": err.message,
                                       "resourceVersion": self.resource_version})
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff_max)
        finally:
            if resync is not None:
                resync.cancel()

    async def _list(self) -> None:
        result = await self.client.list_pages(self.resource, self.namespace,
                                              label_selector=self.label_selector,
                                              field_selector=self.field_selector)
        items: list[Obj] = list(result["items"])
        if self.keep is not None:
            items = [o for o in items if self.keep(o)]
        if self._synced.is_set():
            self.relists += 1
        fresh = {object_key(o): o for o in items}
        for key in [k for k in self.store.keys() if k not in fresh]:
            old = self.store.get(key)
            assert old is not None
            self.store.remove(old)
            self._notify_delete(old)
        for obj in items:
            old = self.store.put(obj)
            if old is None:
                self._notify_add(obj)
            elif old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                    "resourceVersion"):
                self._notify_update(old, obj)
        self.resource_version = str(result["metadata"]["resourceVersion"])
        self._synced.set()

    async def _watch(self) -> None:
        generation = self.client.generation
        stream = self.client.watch(self.resource, self.namespace,
                                   resource_version=self.resource_version,
                                   label_selector=self.label_selector,
                                   field_selector=self.field_selector,
                                   coalesce=self.coalesce)
        try:
            while True:
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for can drop a
                    # cancellation that arrives with an event, and this loop would go on
                    # (a controller-manager's term then never ended; see skiff.tasks).
                    async with asyncio.timeout(self.watch_idle_timeout):
                        ev = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    log.info("watch silent; reconnecting and resuming", extra={
                        "resource": self.resource, "resourceVersion": self.resource_version})
                    await self.client.reconnect(generation=generation)
                    return
                self._apply(ev)
        finally:
            await stream.aclose()

    def _apply(self, ev: WatchEvent) -> None:
        if ev.type == "BOOKMARK":
            self.resource_version = ev.resource_version
            return
        obj = ev.object
        if ev.type == "DELETED" or (self.keep is not None and not self.keep(obj)):
            old = self.store.remove(obj)
            if old is not None or self.keep is None:
                self._notify_delete(old or obj)
        else:
            old = self.store.put(obj)
            if old is None:
                self._notify_add(obj)
            else:
                self._notify_update(old, obj)
        self.resource_version = ev.resource_version

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        while True:
            await asyncio.sleep(self.resync_period)
            for obj in self.store.list():
                self._notify_update(obj, obj)

    def _notify_add(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_add:
                _safe(h.on_add, obj)

    def _notify_update(self, old: Obj, new: Obj) -> None:
        for h in self._handlers:
            if h.on_update:
                _safe(h.on_update, old, new)

    def _notify_delete(self, obj: Obj) -> None:
        for h in self._handlers:
            if h.on_delete:
                _safe(h.on_delete, obj)


def _safe(fn: Callable[..., None], *args: Obj) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("informer event handler failed")
