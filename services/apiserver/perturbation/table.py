"""The stored Perturbations of this apiserver, kept current from its watch cache and
indexed by subject, and the answers the store asks of them: which revision a cached read
of the current user is served at, and how that user's watch is wrapped.

Every apiserver runs its own table (listed from etcd, then fed by the watch cache, as the
admission lookups are), so a Perturbation created through one is applied by all. With no
Perturbation stored, `bool(table)` is False and the store asks nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from skiff.api import ApiError, Reason, lookup
from skiff.api.kinds import KindInfo, storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.crash import Counter
from skiff.apiserver.perturbation.crasher import fire, kill, record_status
from skiff.apiserver.perturbation.journal import (
    Journal,
    current_watch,
    record_object,
    write_entry,
)
from skiff.apiserver.perturbation.rules import Effective, RevisionTimes, Rule, parse
from skiff.apiserver.perturbation.traces import annotate, crash_span
from skiff.apiserver.perturbation.watch import perturbed_watch
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.watchcache import WatchCache, WatchEvent, WatchRequest
from skiff.auth import UserInfo
from skiff.client.credentials import Credentials

log = logging.getLogger(__name__)

RESOURCE = "perturbations"
# How often the head revision is sampled for views lagging by seconds.
SAMPLE_INTERVAL = 0.1


class PerturbationTable:
    """Perturbation name → rule, indexed by user and by group (see the module doc)."""

    def __init__(self, storage: Storage, cache: WatchCache, *, event_ttl: int = 0) -> None:
        self._storage = storage
        self._event_ttl = event_ttl  # the crash Events expire as every Event does
        self._cache = cache
        self._rules: dict[str, Rule] = {}
        self._by_user: dict[str, tuple[Rule, ...]] = {}
        self._by_group: dict[str, tuple[Rule, ...]] = {}
        self.times = RevisionTimes()
        self._floor = 0  # the oldest revision etcd was found to still hold
        self._writes = Counter()  # crash on write: matching commits per Perturbation uid
        self._crashing: set[asyncio.Task[None]] = set()
        self.kubelet: Credentials | None = None  # to the kubelets' own port (pod targets)
        self._journals: dict[str, Journal] = {}  # record: true, by Perturbation uid
        self._own_writes: dict[str, int] = {}  # staleView.fromWrite: writes per uid
        self.pins: dict[str, int] = {}  # staleView.fromWrite: the pinned view per uid
        self.apiserver = f"{socket.gethostname()}/{os.getpid()}"  # app.py sets its address

    def __bool__(self) -> bool:
        return bool(self._rules)

    # -- following the stored objects ------------------------------------------------------

    async def run(self) -> None:
        """Follow the stored Perturbations and sample the head, for ever."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._follow(), name="perturbations-follow")
            tasks.create_task(self._sample(), name="perturbations-sample")

    async def _follow(self) -> None:
        info = lookup(RESOURCE)
        while True:
            try:
                kvs, revision = await self._storage.list(storage_prefix(info))
                self._replace({kv.obj["metadata"]["name"]: kv.obj for kv in kvs if kv.obj})
                request = WatchRequest(info, None, lambda _: True, selects_all=True)
                async for ev in self._cache.watch(request, revision):
                    if ev.type == "BOOKMARK":
                        continue
                    self._apply(ev)
            except ApiError as err:
                log.warning("perturbations resync", extra={"error": err.message})
                await asyncio.sleep(0.5)

    def _apply(self, ev: WatchEvent) -> None:
        name = str(ev.object["metadata"]["name"])
        rules = dict(self._rules)
        rule = parse(ev.object) if ev.type != "DELETED" else None
        if rule is None:
            rules.pop(name, None)
        else:
            rules[name] = rule
        self._index(rules)
        log.info("perturbation " + ("removed" if rule is None else "applied"),
                 extra={"perturbation": name, "revision": ev.revision})

    def _replace(self, objects: dict[str, Obj]) -> None:
        rules = {}
        for name, obj in objects.items():
            rule = parse(obj)
            if rule is not None:
                rules[name] = rule
        self._index(rules)

    def _index(self, rules: dict[str, Rule]) -> None:
        by_user: dict[str, list[Rule]] = {}
        by_group: dict[str, list[Rule]] = {}
        for rule in rules.values():
            if rule.user:
                by_user.setdefault(rule.user, []).append(rule)
            else:
                by_group.setdefault(rule.group, []).append(rule)
        # swapped whole, never mutated: readers see one state or the next
        self._by_user = {k: tuple(v) for k, v in by_user.items()}
        self._by_group = {k: tuple(v) for k, v in by_group.items()}
        self._rules = rules
        self._writes.forget({r.uid for r in rules.values() if r.crash is not None})
        live = {r.uid for r in rules.values()}
        for kept in (self._journals, self._own_writes, self.pins):
            for uid in [u for u in kept if u not in live]:
                del kept[uid]  # deleting the Perturbation drops its journal and pin
        for rule in rules.values():
            if rule.record and rule.uid not in self._journals:
                self._journals[rule.uid] = Journal()

    async def _sample(self) -> None:
        await self._cache.ready()
        while True:
            self.times.record(revision=self._cache.revision, now=time.monotonic())
            await asyncio.sleep(SAMPLE_INTERVAL)

    # -- the store's questions ---------------------------------------------------------------

    def for_user(self, user: UserInfo | None) -> Effective | None:
        """The rules that target `user` (None: none does)."""
        if user is None or not self._rules:
            return None
        found = list(self._by_user.get(user.name, ()))
        for group in user.groups:
            found.extend(self._by_group.get(group, ()))
        return Effective(tuple(found)) if found else None

    def view(self, effective: Effective) -> int:
        """The revision `effective`'s stale view serves now (0: none, the present)."""
        head = self._cache.revision
        view = effective.view(head=head, times=self.times, now=time.monotonic(),
                              pins=self.pins)
        return min(view, head) if view else 0

    @property
    def head(self) -> int:
        """The watch cache's newest revision."""
        return self._cache.revision

    def journals(self, effective: Effective) -> list[Journal]:
        """The journals `effective`'s recording rules write to."""
        return [j for r in effective.recording
                if (j := self._journals.get(r.uid)) is not None]

    def stalest(self, effective: Effective) -> str:
        """The name of the Perturbation whose stale view is served now ("" if none)."""
        rule = effective.stalest(head=self._cache.revision, times=self.times,
                                 now=time.monotonic(), pins=self.pins)
        return rule.name if rule is not None else ""

    def record(self, obj: Obj, *, since_seq: int = 0) -> Obj:
        """The `PerturbationRecord` of stored Perturbation `obj` on this apiserver."""
        meta = obj.get("metadata") or {}
        return record_object(str(meta.get("name") or ""), apiserver=self.apiserver,
                             journal=self._journals.get(str(meta.get("uid") or "")),
                             since_seq=since_seq)

    async def read_revision(self, revision: int) -> int:
        """The revision a read that allows a cached answer is served at, for the current
        user: `revision` (0: the present) unless a stale view targets them. A view older
        than etcd's compaction floor is Gone: the oldest revision still held is served."""
        effective = self.for_user(current_user.get())
        view = self.view(effective) if effective is not None else 0
        if not view or view <= revision:
            return revision
        view = max(view, self._floor)
        if await self._held(view):
            return view
        low, high = view, self._cache.revision  # low compacted, high held
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if await self._held(mid) else (mid, high)
        self._floor = high
        log.warning("perturbation's stale view is compacted; serving the oldest revision "
                    "still held", extra={"revision": view, "served": high})
        return high

    async def _held(self, revision: int) -> bool:
        try:
            await self._storage.get(storage_prefix(lookup(RESOURCE)), revision=revision)
        except ApiError as err:
            if err.reason == Reason.GONE:
                return False
            raise
        return True

    def watch(self, info: KindInfo, source: AsyncIterator[list[WatchEvent]]
              ) -> AsyncIterator[list[WatchEvent]]:
        """`source`, or the current user's perturbed copy of it when a rule targets them —
        from the start, or from the first batch after a rule that targets them appears (a
        controller's informer keeps one watch open for minutes: a Perturbation created
        meanwhile must reach it, not only its next watch). Until then each batch pays one
        truth test."""
        user = current_user.get()
        if user is None:
            return source
        effective = self.for_user(user) if self._rules else None
        if effective is None or not (effective.stale or effective.missed):
            return self._until_perturbed(user, info, source)
        return self._perturbed(user, info, source)

    async def _until_perturbed(self, user: UserInfo, info: KindInfo,
                               source: AsyncIterator[list[WatchEvent]]
                               ) -> AsyncIterator[list[WatchEvent]]:
        async for batch in source:
            if self._rules:
                effective = self.for_user(user)
                if effective is not None and (effective.stale or effective.missed):
                    async for out in self._perturbed(user, info, _prepend(batch, source)):
                        yield out
                    return
            yield batch

    def _perturbed(self, user: UserInfo, info: KindInfo,
                   source: AsyncIterator[list[WatchEvent]]) -> AsyncIterator[list[WatchEvent]]:
        def note(ev: WatchEvent, fate: str) -> None:
            recorded = current_watch.get()  # set at each step by a recorded watch
            if recorded is not None:
                recorded.event(ev.type, ev.object, ev.revision, fate)
            meta = ev.object.get("metadata") or {}
            annotate(self._cause(user, fate), f"event-{fate}", type=ev.type,
                     object=f"{meta.get('namespace') or ''}/{meta.get('name') or ''}",
                     revision=ev.revision)

        return perturbed_watch(self, user, info, source, note)

    def _cause(self, user: UserInfo, fate: str) -> str:
        """The Perturbation(s) behind a watch event's `fate` (for traces)."""
        effective = self.for_user(user)
        if effective is None:
            return ""
        if fate == "held" and effective.stale:
            return self.stalest(effective) or ",".join(r.name for r in effective.rules)
        return ",".join(r.name for r in effective.rules if r.missed is not None)

    def wrote(self, info: KindInfo, verb: str, obj: Obj, subresource: str = "") -> None:
        """The current user's `verb` write of `obj` committed: journal it, count it against
        their fromWrite views (pinned at the k-th) and crash-on-write rules (fired at the
        k-th). A pid target is killed here, before the write is answered, so the writer
        dies with its write committed and unanswered whatever the machine's load; a pod
        target (its kubelet kills it) and the recording follow in a task."""
        if not self._rules:
            return
        user = current_user.get()
        effective = self.for_user(user)
        if effective is None or user is None:
            return
        revision = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        journals = self.journals(effective)
        for journal in journals:
            journal.add("write", write_entry(info, verb, obj, subresource=subresource))
        for rule in effective.from_write:
            self._count_own(rule, revision)
        for rule in effective.crashes:
            assert rule.crash is not None
            if rule.crash.matches(info, verb, obj) and self._writes.count(rule.uid,
                                                                          rule.crash):
                done = kill(rule) if rule.crash.pid else None
                self._spawn(self._crash(rule, revision, user.name, journals, done),
                            f"perturbation-crash-{rule.name}")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._crashing.add(task)
        task.add_done_callback(self._crashing.discard)

    def _count_own(self, rule: Rule, revision: int) -> None:
        """One more committed write under a fromWrite view: pin it at the k-th."""
        assert rule.stale is not None
        if rule.uid in self.pins:
            return
        n = self._own_writes.get(rule.uid, 0) + 1
        self._own_writes[rule.uid] = n
        if n < rule.stale.from_write:
            return
        pinned = max(revision - 1, 1)
        self.pins[rule.uid] = pinned
        log.info("perturbation's view pinned at the identity's own write",
                 extra={"perturbation": rule.name, "revision": pinned})
        annotate(rule.name, "view-pinned", write=n, revision=revision)
        self._spawn(self._record_pin(rule, pinned), f"perturbation-pin-{rule.name}")

    async def _record_pin(self, rule: Rule, pinned: int) -> None:
        try:
            await record_status(self._storage, rule, lambda status: status.update(
                pinnedRevision=pinned))
        except ApiError as err:
            log.warning("could not record a pinned view", extra={"error": err.message})

    async def _crash(self, rule: Rule, revision: int, writer: str,
                     journals: list[Journal], done: tuple[bool, str] | None) -> None:
        assert rule.crash is not None
        target = rule.crash.describe()
        with crash_span(rule.name, target=target, revision=revision, writer=writer):
            killed, message = await fire(self._storage, rule, revision=revision,
                                         writer=writer, kubelet=self.kubelet, done=done,
                                         event_ttl=self._event_ttl)
        for journal in journals:
            journal.add("crash", {"perturbation": rule.name, "revision": revision,
                                  "target": target, "killed": killed, "message": message})


async def _prepend(first: list[WatchEvent], rest: AsyncIterator[list[WatchEvent]]
                   ) -> AsyncIterator[list[WatchEvent]]:
    """`first`, then the rest of a stream already being read."""
    yield first
    async for batch in rest:
        yield batch
