"""The watch cache: one etcd watch fanned out to every gRPC watcher (SPEC AS5).

The cache watches every etcd key from the revision at which it started and keeps the last
`capacity` events under `/registry/` in a window. A watcher asking for revision R is served
from the window when R is inside it (so 1,000 watchers cost one etcd watch); an older R
falls back to a dedicated etcd watch from R+1, which is still exact (etcd's log is the event
log) and answers Gone when R has been compacted. Watchers have bounded queues: one that
falls too far behind is closed and resumes from its last revision, as Kubernetes does.

The keys outside `/registry/` (the compaction key, Service IP and NodePort allocations, the
apiservers' endpoint records) are never queued, but they move the revision the cache has
seen, as they move etcd's. A cache that learnt its revision from `/registry/` alone stayed
behind the quorum's whenever the last writes were elsewhere: its currency check failed and
the apiserver reported NOT_SERVING on an idle cluster (CI saw both apiservers of a fresh HA
cluster stuck so for a minute). Kubernetes learns that revision from etcd's progress
notifications; etcd 3.4's requested ones are not ordered with the events (etcd#15220) and
its periodic ones come at an interval set on etcd, while a watch of every key is exact on
any etcd.

A watch from a revision newer than the cache has seen (the client came from another
apiserver, or this one's etcd member is behind) waits up to `too_large_wait` for the cache to
reach it, as Kubernetes does, then fails with Timeout "Too large resource version" so the
client resumes elsewhere instead of waiting on a cache that may be cut off from the quorum.

`monitor()` confirms the cache's currency every `quorum_check_interval`: a quorum
(linearizable) read of etcd's revision that must answer within `quorum_check_timeout`
(kube-apiserver's `--etcd-readycheck-timeout`), then a wait for the cache to reach it. When
the read fails or is late (this apiserver's etcd member lost the quorum, it is cut off from
etcd, or etcd is gone), every watch is closed with ServiceUnavailable and new ones are
refused until a read succeeds again: the stream would otherwise stay open with bookmarks
that look current while it can see nothing the majority commits, and its clients would never
move to another apiserver. Each verdict of `monitor()` (current or not: the quorum read
failed, or the cache did not reach etcd's revision in time) is passed to `on_currency`,
which the apiserver uses to report its gRPC health NOT_SERVING while it cannot vouch for its
data (so `skiff status` and failing-over clients see it). A read that fails while the etcd watch
has delivered a new revision in the last half of the read's time is slow, not lost: a member
cut off from the quorum commits nothing new, while an overloaded one (seen at 10,000 hollow
nodes) commits on and only answers the read late; closing every watch then made every
informer re-list at once, adding load where there was least room. Such a check reads again,
verdict unchanged, until a read answers or the watch stops too. So a cut-off apiserver
closes its watches and reports NOT_SERVING at most `quorum_check_interval +
quorum_check_timeout` (or 1.5 × `quorum_check_timeout`, when the cut falls in a read's second
half) after the cut, however busy it is, and serves again at the first check after the
heal.

The monitor never ends but by cancellation of its own task: grpc.aio cancels the calls of
an etcd client another request's failover closes, which reaches the caller as a
CancelledError nobody asked for; such an error is a failed check like any other (it once
ended the monitor silently, leaving a cut-off apiserver healthy for good).

Label and field selectors are applied per watcher with Kubernetes' transition rules: an
object that stops matching is sent as DELETED, one that starts matching as ADDED.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aetcd.exceptions
import tenacity

from skiff.api.errors import ApiError, Reason
from skiff.api.kinds import REGISTRY_PREFIX, KindInfo, parse_key, storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.values import RawEvent
from skiff.rpc import encode

log = logging.getLogger(__name__)

Matcher = Callable[[Obj], bool]


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: Obj
    revision: int
    # The etcd event whose object this is, unchanged (so its encoding can be shared).
    raw: RawEvent | None = field(default=None, compare=False, repr=False)

    def to_wire(self) -> Obj:
        return {"type": self.type, "object": self.object}

    def encoded(self) -> bytes:
        """`to_wire()` as msgpack, encoded once per etcd event and type for all watchers."""
        if self.raw is None or self.raw.obj is not self.object:
            return encode(self.to_wire())
        data = self.raw.wire.get(self.type)
        if data is None:
            data = self.raw.wire[self.type] = encode(self.to_wire())
        return data


@dataclass
class WatchRequest:
    info: KindInfo
    namespace: str | None
    matches: Matcher  # label + field selector
    name: str | None = None
    # No selector: every object matches, so an update's previous value need not be decoded
    # to tell MODIFIED from ADDED or DELETED (it was ~5 % of a busy apiserver's CPU).
    selects_all: bool = False
    # The `spec.nodeName` its field selector requires (a kubelet's watch), if any: on pods
    # the cache then wakes this watcher only for pods that are, or were, on that node.
    node_name: str | None = None


def _bookmark(info: KindInfo, revision: int) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"kind": info.kind, "apiVersion": info.api_version,
                                   "metadata": {"resourceVersion": str(revision)}}, revision)


def translate(raw: RawEvent, req: WatchRequest) -> WatchEvent | None:
    """A raw etcd event as this watcher should see it, or None when it is not theirs."""
    parsed = parse_key(raw.key)
    if parsed is None:
        return None
    info, namespace, name = parsed
    if info.ref != req.info.ref:
        return None
    if req.namespace and namespace != req.namespace:
        return None
    if req.name and name != req.name:
        return None
    if req.selects_all and raw.type != "DELETE":
        assert raw.obj is not None
        kind = "MODIFIED" if not raw.created and raw.has_prev else "ADDED"
        return WatchEvent(kind, raw.obj, raw.revision, raw)
    new_ok = raw.obj is not None and req.matches(raw.obj)
    old_ok = raw.prev is not None and req.matches(raw.prev)
    if raw.type == "DELETE":
        if raw.prev is None or not old_ok:
            return None
        return WatchEvent("DELETED", _at_revision(raw.prev, raw.revision), raw.revision)
    assert raw.obj is not None
    if raw.created or raw.prev is None:
        return WatchEvent("ADDED", raw.obj, raw.revision, raw) if new_ok else None
    if new_ok and old_ok:
        return WatchEvent("MODIFIED", raw.obj, raw.revision, raw)
    if new_ok:
        return WatchEvent("ADDED", raw.obj, raw.revision, raw)
    if old_ok and raw.prev is not None:
        # Kubernetes' cacher: an object that left the selection is DELETED carrying its
        # previous state (the one that matched) at the new resourceVersion.
        return WatchEvent("DELETED", _at_revision(raw.prev, raw.revision), raw.revision)
    return None


def _cancelled() -> bool:
    """Whether this task was asked to stop (and not merely handed a CancelledError by a
    grpc.aio call whose etcd channel was closed under it)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _at_revision(obj: Obj, revision: int) -> Obj:
    return {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(revision)}}


# Most events one watch message carries (a wake-up that finds more sends them in turns).
BATCH_LIMIT = 256


class _Ticker:
    """One timer for every busy watcher (issue 37): a watcher that sent a frame less than
    `period` ago waits for the next tick before it drains its queue again, so under load it
    sends a frame per period holding everything that came meanwhile, and all busy watchers
    wake together on one timer instead of one each. An idle watcher never waits."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._next: asyncio.Future[None] | None = None

    def next(self) -> asyncio.Future[None]:
        """The next tick; shielded, as a waiter's cancellation must not cancel the others'."""
        tick = self._next
        if tick is None or tick.done():
            loop = asyncio.get_running_loop()
            tick = self._next = loop.create_future()
            loop.call_later(self.period, _resolve, tick)
        return asyncio.shield(tick)


def _resolve(tick: asyncio.Future[None]) -> None:
    if not tick.done():
        tick.set_result(None)


# Kubernetes' cacher keeps pod watchers indexed by the spec.nodeName their field selector
# requires (its NodeNameTriggerFunc): with one watch per kubelet, every pod event would
# otherwise wake every kubelet's watcher to find it is not theirs (O(nodes) an event).
_POD_PREFIX = REGISTRY_PREFIX + "pods/"


def _node_of(obj: Obj | None) -> str | None:
    """A pod's spec.nodeName as its field selector compares it ("" when unset)."""
    if obj is None:
        return None
    return str((obj.get("spec") or {}).get("nodeName") or "")


@dataclass(eq=False)
class _Subscriber:
    request: WatchRequest
    after: int  # deliver only events with revision > after
    # Only keys under this prefix (the watched resource, and namespace) are queued: a watcher
    # is not woken for every change of every other kind.
    prefix: str = ""
    # Unbounded on purpose: the cache closes a subscriber (appending a sentinel after its
    # contiguous events) once it holds `QUEUE_LIMIT`, so nothing queued is ever dropped.
    # False: the watcher's bookmark alarm (see `WatchCache.watch_batches`).
    queue: asyncio.Queue[RawEvent | None | ApiError | bool] = field(
        default_factory=asyncio.Queue)
    QUEUE_LIMIT = 10_000


class WatchCache:
    """Keeps one etcd watch on every key and a window of recent events under /registry/."""

    def __init__(self, storage: Storage, *, capacity: int = 50_000,
                 bookmark_interval: float = 10.0, too_large_wait: float = 3.0,
                 quorum_check_interval: float = 5.0, quorum_check_timeout: float = 2.0,
                 on_currency: Callable[[bool], Awaitable[None]] | None = None,
                 coalesce: float = 0.0) -> None:
        self._storage = storage
        # a busy watcher gets at most one frame per `coalesce` seconds (0: every wake-up)
        self._ticker = _Ticker(coalesce) if coalesce > 0 else None
        self._on_currency = on_currency
        self.too_large_wait = too_large_wait
        self.quorum_check_interval = quorum_check_interval
        self.quorum_check_timeout = quorum_check_timeout
        self.unavailable: ApiError | None = None  # set while currency cannot be confirmed
        self._capacity = capacity
        self.bookmark_interval = bookmark_interval
        self._window: collections.deque[RawEvent] = collections.deque()
        self._window_start = 0  # the window holds every event with revision > this
        # key → the newest event of that key still in the window (see `recent`).
        self._latest: dict[str, RawEvent] = {}
        self.revision = 0  # newest revision the cache has seen
        self._advanced_at = -math.inf  # monotonic time `revision` last moved
        self._subscribers: set[_Subscriber] = set()  # every watcher of the window
        self._unindexed: set[_Subscriber] = set()  # those woken for every event
        self._by_node: dict[str, set[_Subscriber]] = {}  # pod watchers by their node
        self._ready = asyncio.Event()
        self._progress = asyncio.Condition()

    async def run(self) -> None:
        """Follow etcd forever, resuming from the last revision after any failure: no
        etcd error ends it (SPEC AU10), each one is logged and retried with backoff."""
        if not self._ready.is_set():  # (run again after a failure: resume, keep the window)
            start = await self._start_revision()
            self._window_start = self.revision = start
            self._ready.set()
        delay = 0.05
        while True:
            try:
                async for raw in self._storage.watch("", start_revision=self.revision + 1):
                    self._moved_to(raw.revision)
                    if raw.key.startswith(REGISTRY_PREFIX):  # else nothing to queue
                        self._append(raw)
                    delay = 0.05
                    async with self._progress:
                        self._progress.notify_all()
            except ApiError as err:
                if err.reason == Reason.GONE:
                    # Our own resume point was compacted: every watcher must re-list.
                    log.warning("watch cache fell behind compaction; resetting watchers")
                    self._reset(err)
                    start = await self._start_revision()
                    self._window_start = self.revision = start
                else:
                    log.warning("etcd watch failed; resuming", extra={
                        "revision": self.revision, "error": err.message})
            except (aetcd.exceptions.ClientError, OSError) as err:
                log.warning("etcd watch interrupted; resuming",
                            extra={"revision": self.revision, "error": str(err)})
            except asyncio.CancelledError:
                if _cancelled():
                    raise
                # the etcd client was closed under the watch (a failover): resume
                log.warning("etcd watch interrupted; resuming", extra={
                    "revision": self.revision, "error": "the etcd client was closed"})
            except Exception as err:  # anything else etcd's client raises: resume too
                log.warning("etcd watch failed; resuming", extra={
                    "revision": self.revision, "error": f"{type(err).__name__}: {err}"})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _start_revision(self) -> int:
        """etcd's current revision, asked until etcd answers (with backoff)."""
        async for attempt in tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception_type(Exception),
                wait=tenacity.wait_exponential(multiplier=0.05, max=2.0),
                before_sleep=lambda state: log.warning(
                    "etcd revision unreadable; retrying", extra={
                        "error": str(state.outcome.exception()) if state.outcome else ""}),
                reraise=True):
            with attempt:
                return await self._storage.current_revision()
        raise AssertionError("unreachable")  # pragma: no cover

    async def ready(self) -> None:
        await self._ready.wait()

    async def monitor(self) -> None:
        """Confirm forever that the cache follows etcd's quorum (see the module doc)."""
        await self.ready()
        while True:
            await asyncio.sleep(self.quorum_check_interval)
            await self.check_currency()

    async def check_currency(self) -> bool:
        """One check of `monitor()`: True when the cache is confirmed current."""
        while True:
            started = time.monotonic()
            try:
                revision = await self._storage.quorum_revision(
                    timeout=self.quorum_check_timeout)
                break
            except asyncio.CancelledError:
                if _cancelled():
                    raise
                await self._lost("the etcd client was closed during the quorum read")
                return False
            except Exception as err:  # never let a failed check take the apiserver down
                why = (err.message if isinstance(err, ApiError)
                       else "a quorum read of etcd failed (see the apiserver log)")
                if not self._following():
                    await self._lost(why, err)
                    return False
                # Slow, not lost: read again (no sooner than a read's time after this one
                # started, so a read that fails at once is no busy loop), keeping the
                # verdict as it was until a read answers or the watch stops too.
                log.warning("etcd slow: its quorum read failed while its watch delivers "
                            "new revisions; watches kept open",
                            extra={"revision": self.revision, "error": why})
                await asyncio.sleep(max(0.0, started + self.quorum_check_timeout
                                        - time.monotonic()))
        if not await self.wait_for_revision(revision, self.too_large_wait):
            log.warning("watch cache behind etcd",
                        extra={"revision": self.revision, "etcdRevision": revision})
            await self._report(current=False)
            return False
        if self.unavailable is not None:
            log.info("etcd quorum reachable again; serving watches",
                     extra={"revision": self.revision})
        self.unavailable = None
        await self._report(current=True)
        return True

    def _following(self) -> bool:
        """The etcd watch delivered a new revision in the last half of a quorum read's
        time: the member is committing what a quorum agrees on, only too busy to answer
        the read in time (it is overloaded, not cut off)."""
        return time.monotonic() - self._advanced_at <= self.quorum_check_timeout / 2

    async def _lost(self, why: str, err: BaseException | None = None) -> None:
        """The quorum read failed: close every watch, refuse new ones, report it."""
        if self.unavailable is None:
            log.warning("etcd quorum unreachable; closing watches", extra={
                "revision": self.revision,
                "error": f"{type(err).__name__}: {err}" if err is not None else why})
        self.unavailable = ApiError(Reason.SERVICE_UNAVAILABLE, (
            f"this apiserver cannot confirm its watch cache is current: {why}; "
            "watch again from your last resourceVersion (on another apiserver if "
            "you have one)"))
        self._fail_watchers(self.unavailable)
        await self._report(current=False)

    async def _report(self, *, current: bool) -> None:
        if self._on_currency is not None:
            await self._on_currency(current)

    def _fail_watchers(self, err: ApiError) -> None:
        for sub in self._subscribers:
            sub.queue.put_nowait(err)
        self._subscribers.clear()
        self._unindexed.clear()
        self._by_node.clear()

    def _moved_to(self, revision: int) -> None:
        """etcd's revision the cache has seen (of any key: see the module doc)."""
        self.revision = revision
        self._advanced_at = time.monotonic()

    def _append(self, raw: RawEvent) -> None:
        self._window.append(raw)
        self._latest[raw.key] = raw
        while len(self._window) > self._capacity:
            old = self._window.popleft()
            self._window_start = old.revision
            if self._latest.get(old.key) is old:
                del self._latest[old.key]
        self._offer(raw, self._unindexed)
        if self._by_node and raw.key.startswith(_POD_PREFIX):
            node, was = _node_of(raw.obj), _node_of(raw.prev)
            if node is not None and node in self._by_node:
                self._offer(raw, self._by_node[node])
            if was is not None and was != node and was in self._by_node:
                self._offer(raw, self._by_node[was])

    def _offer(self, raw: RawEvent, subscribers: set[_Subscriber]) -> None:
        for sub in list(subscribers):
            if raw.revision <= sub.after or not raw.key.startswith(sub.prefix):
                continue
            if sub.queue.qsize() >= _Subscriber.QUEUE_LIMIT:
                # Too slow: close it; the client resumes from its last revision.
                self._remove(sub)
                sub.queue.put_nowait(None)
            else:
                sub.queue.put_nowait(raw)

    def _add(self, sub: _Subscriber) -> None:
        self._subscribers.add(sub)
        node = sub.request.node_name
        if node is not None and sub.prefix.startswith(_POD_PREFIX):
            self._by_node.setdefault(node, set()).add(sub)
        else:
            self._unindexed.add(sub)

    def _remove(self, sub: _Subscriber) -> None:
        self._subscribers.discard(sub)
        self._unindexed.discard(sub)
        node = sub.request.node_name
        if node is not None and (subs := self._by_node.get(node)) is not None:
            subs.discard(sub)
            if not subs:
                del self._by_node[node]

    def recent(self, key: str) -> RawEvent | None:
        """The newest change of `key` the cache has seen, while it is still in the window
        (None otherwise). It may lag etcd: a suggestion for a compare-and-swap on its
        revision (Kubernetes' GuaranteedUpdate with the watch cache's object), never an
        answer to a read. Its `obj` is shared with every watcher: do not modify it."""
        return self._latest.get(key)

    def _reset(self, err: ApiError) -> None:
        self._window.clear()
        self._latest.clear()
        for sub in self._subscribers:
            sub.queue.put_nowait(err)
        self._subscribers.clear()
        self._unindexed.clear()
        self._by_node.clear()

    async def wait_for_revision(self, revision: int, timeout: float) -> bool:
        """Wait until the cache has seen `revision` (a write this server just made)."""
        async with self._progress:
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see skiff.tasks
                    await self._progress.wait_for(lambda: self.revision >= revision)
            except TimeoutError:
                return False
        return True

    async def watch(self, req: WatchRequest, after: int) -> AsyncIterator[WatchEvent]:
        """Every change of `req` with revision > `after`, in order, plus bookmarks."""
        async for batch in self.watch_batches(req, after):
            for ev in batch:
                yield ev

    async def watch_batches(self, req: WatchRequest, after: int, *, coalesce: bool = False
                            ) -> AsyncIterator[list[WatchEvent]]:
        """`watch`, as lists: each list holds every event that was waiting when the
        watcher woke (up to `BATCH_LIMIT`), so a busy apiserver sends a watcher one gRPC
        message per wake-up instead of one per event; an idle one still sends each event
        as it comes (a list of one), without waiting for company. With `coalesce` (a
        client's stream, not the apiserver's own lookups, which must see a change at once)
        a busy watcher also waits for the cache's next tick before it drains its queue."""
        await self.ready()
        if self.unavailable is not None:
            raise self.unavailable
        if after > self.revision and not await self.wait_for_revision(after,
                                                                      self.too_large_wait):
            raise ApiError(Reason.TIMEOUT, (
                f"Too large resource version: {after}, current: {self.revision}: this "
                "apiserver's watch cache is behind (is its etcd member cut off from the "
                "quorum?); retry, or use another apiserver"))
        if after < self._window_start:
            async for ev in self._watch_etcd(req, after):
                yield [ev]
            return
        sub = _Subscriber(req, after, storage_prefix(req.info, req.namespace))
        # No await between the snapshot and the registration: nothing is lost or repeated.
        for raw in self._window:
            if raw.revision > after and raw.key.startswith(sub.prefix):
                sub.queue.put_nowait(raw)
        self._add(sub)
        told = processed = after  # what the client knows / what this watcher has looked at
        loop = asyncio.get_running_loop()
        next_bookmark = loop.time() + self.bookmark_interval
        queue = sub.queue
        ticker = self._ticker if coalesce else None
        sent_at = -math.inf
        # The bookmark's alarm is a `False` in the queue: an idle watcher wakes for it, and
        # no wake-up pays for a timeout of its own (one timer per watcher, not per wake).
        alarm = loop.call_at(next_bookmark, queue.put_nowait, False)
        try:
            while True:
                item: RawEvent | ApiError | None | bool
                if ticker is not None and loop.time() - sent_at < ticker.period:
                    await ticker.next()  # busy: let this frame fill until the next tick
                item = queue.get_nowait() if not queue.empty() else await queue.get()
                batch: list[WatchEvent] = []
                rang = False
                while True:
                    if item is None:
                        if batch:
                            yield batch
                        return  # closed for being slow; the client resumes
                    if isinstance(item, ApiError):
                        if batch:
                            yield batch
                        raise item
                    if item is False:
                        rang = True
                    elif isinstance(item, RawEvent):
                        translated = translate(item, req)
                        if translated is not None:
                            told = translated.revision
                            batch.append(translated)
                    if queue.empty() or len(batch) >= BATCH_LIMIT:
                        break
                    item = queue.get_nowait()
                if loop.time() >= next_bookmark:
                    # Progress the client could not see (other kinds, filtered objects), and
                    # a heartbeat: clients treat a long-silent stream as cut by a partition.
                    if queue.empty():
                        # Every change up to the cache's revision was queued here or was
                        # not this watcher's: that much progress is safe to tell.
                        processed = max(processed, self.revision)
                        told = max(told, processed)
                        batch.append(_bookmark(req.info, told))
                    next_bookmark = loop.time() + self.bookmark_interval
                    rang = True
                if rang:  # (a timer may ring a hair early: it is then set again)
                    alarm.cancel()
                    alarm = loop.call_at(next_bookmark, queue.put_nowait, False)
                if batch:
                    yield batch
                    sent_at = loop.time()
        finally:
            alarm.cancel()
            self._remove(sub)

    async def _watch_etcd(self, req: WatchRequest, after: int) -> AsyncIterator[WatchEvent]:
        log.info("serving watch from etcd (revision older than the cache window)",
                 extra={"resource": req.info.resource, "after": after})
        async for raw in self._storage.watch(REGISTRY_PREFIX + req.info.resource + "/",
                                             start_revision=after + 1):
            ev = translate(raw, req)
            if ev is not None:
                yield ev

