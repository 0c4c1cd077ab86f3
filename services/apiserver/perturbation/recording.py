"""The store's read and watch hooks (issue 35): `@reads("get"|"list")` and `@watches` wrap
the registry's methods so that, for a user a Perturbation targets, a read that allows a
cached answer is served at its stale view, a stale read is marked on the request's span,
and a `record: true` Perturbation journals the read, the watch and each event delivered;
`@writes(verb)` journals a recorded identity's failed writes (code and reason).

With no Perturbation stored a wrapped read or write costs one truth test
(`self.perturbations`) and hands back the method's own coroutine; a watch is wrapped in
one generator that pays one truth test per batch (a Perturbation created later must reach
a watch already open). Only the
calls an endpoint makes for a client are journaled: they pass `allow_cached` (every
client get and list does); the registry's own reads (an update's current object, a
watch's initial list) do not.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from skiff.api import ApiError, Reason, lookup
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.journal import (
    Journal,
    WatchNote,
    current_watch,
    next_watch_id,
    read_entry,
    watch_entry,
    write_entry,
)
from skiff.apiserver.perturbation.table import PerturbationTable
from skiff.apiserver.perturbation.traces import annotate
from skiff.apiserver.storage.watchcache import WatchEvent
from skiff.auth import UserInfo

P = ParamSpec("P")
T = TypeVar("T")


class Perturbed(Protocol):
    """The registry, as the wrappers see it."""

    perturbations: PerturbationTable


@dataclass(frozen=True)
class _Call:
    """One registry call, its arguments told apart: the registry, `resource`,
    `namespace`, the object or name after them (`target`), and every keyword."""

    owner: Perturbed
    resource: str
    namespace: str | None
    target: Any
    kw: dict[str, Any]

    @classmethod
    def of(cls, args: tuple[Any, ...], kw: dict[str, Any], target: str = "name") -> _Call:
        rest = list(args[1:])
        for key in ("resource", "namespace", target):
            if key in kw:
                rest.insert({"resource": 0, "namespace": 1}.get(key, 2), kw[key])
        rest += [None] * (3 - len(rest))
        return cls(cast(Perturbed, args[0]), str(rest[0]), rest[1], rest[2], kw)


def reads(verb: str) -> Callable[[Callable[P, Coroutine[Any, Any, Obj]]],
                                 Callable[P, Coroutine[Any, Any, Obj]]]:
    """Wrap the registry's `get` or `list` (see the module doc)."""
    def wrap(fn: Callable[P, Coroutine[Any, Any, Obj]]
             ) -> Callable[P, Coroutine[Any, Any, Obj]]:
        @functools.wraps(fn)
        def method(*args: P.args, **kw: P.kwargs) -> Coroutine[Any, Any, Obj]:
            if not cast(Perturbed, args[0]).perturbations:
                return fn(*args, **kw)
            return _read(verb, cast(Callable[..., Coroutine[Any, Any, Obj]], fn),
                         args, cast(dict[str, Any], kw))
        return method
    return wrap


async def _read(verb: str, fn: Callable[..., Coroutine[Any, Any, Obj]],
                args: tuple[Any, ...], kw: dict[str, Any]) -> Obj:
    table = cast(Perturbed, args[0]).perturbations
    effective = table.for_user(current_user.get())
    if effective is None:
        return await fn(*args, **kw)
    requested = int(kw.get("revision") or 0)
    served, call = requested, kw
    if kw.get("allow_cached") and effective.stale and not kw.get("continue_token"):
        served = await table.read_revision(requested)
        call = {**kw, "revision": served, "allow_cached": False}
    head = table.head
    stale = bool(served) and served != requested and served < head
    if stale:
        annotate(table.stalest(effective), "stale-read", served=served, head=head)
    journals = (table.journals(effective)
                if "allow_cached" in kw and current_watch.get() is None else [])
    if not journals:
        return await fn(*args, **call)
    c = _Call.of(args, kw)
    info = lookup(c.resource)
    name = str(c.target or "") if verb == "get" else ""
    try:
        result: Obj | None = await fn(*args, **call)
    except ApiError as err:
        if verb != "get" or err.reason != Reason.NOT_FOUND:
            raise
        result = None
        _journal(journals, verb, info, c.namespace, name, kw, served or head, head, stale,
                 result)
        raise
    assert result is not None
    if verb == "list":
        served = int((result.get("metadata") or {}).get("resourceVersion") or 0)
    _journal(journals, verb, info, c.namespace, name, kw, served or head, head, stale,
             result)
    return result


def _journal(journals: list[Journal], verb: str, info: KindInfo, namespace: str | None,
             name: str, kw: dict[str, Any], served: int, head: int, stale: bool,
             result: Obj | None) -> None:
    entry = read_entry(verb, info, namespace, name, kw=kw, served=served, head=head,
                       stale=stale, result=result)
    for journal in journals:
        journal.add("read", entry)


def writes(verb: str) -> Callable[[Callable[P, Coroutine[Any, Any, T]]],
                                  Callable[P, Coroutine[Any, Any, T]]]:
    """Wrap the registry's `create`, `update` or `delete`: a recorded identity's write that
    fails journals `code` and `reason` (a committed one is journaled by the table's
    `wrote`, with its revision)."""
    def wrap(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(fn)
        def method(*args: P.args, **kw: P.kwargs) -> Coroutine[Any, Any, T]:
            if not cast(Perturbed, args[0]).perturbations:
                return fn(*args, **kw)
            return _write(verb, fn(*args, **kw), args, cast(dict[str, Any], kw))
        return method
    return wrap


async def _write(verb: str, call: Coroutine[Any, Any, T], args: tuple[Any, ...],
                 kw: dict[str, Any]) -> T:
    try:
        return await call
    except ApiError as err:
        table = cast(Perturbed, args[0]).perturbations
        effective = table.for_user(current_user.get())
        journals = table.journals(effective) if effective is not None else []
        if journals:
            c = _Call.of(args, kw, "name" if verb == "delete" else "obj")
            obj = c.target if isinstance(c.target, dict) else {"metadata": {
                "name": str(c.target or "")}}
            meta = obj.get("metadata") or {}
            if not meta.get("namespace") and c.namespace:
                obj = {**obj, "metadata": {**meta, "namespace": c.namespace}}
            entry = write_entry(lookup(c.resource), verb, obj,
                                subresource=str(kw.get("subresource") or ""))
            del entry["revision"]
            entry.update(code=err.code, reason=str(err.reason), message=err.message)
            for journal in journals:
                journal.add("write", entry)
        raise


def watches(fn: Callable[P, AsyncIterator[list[WatchEvent]]]
            ) -> Callable[P, AsyncIterator[list[WatchEvent]]]:
    """Wrap the registry's `watch_batches` (see the module doc): a recorded identity's
    watch is journaled from its start, or — a controller's informer keeps one watch open
    for minutes — from the first batch after a `record: true` Perturbation targeting it
    appears (until then each batch pays one truth test)."""
    @functools.wraps(fn)
    def method(*args: P.args, **kw: P.kwargs) -> AsyncIterator[list[WatchEvent]]:
        source = fn(*args, **kw)
        user = current_user.get()
        if user is None:
            return source
        table = cast(Perturbed, args[0]).perturbations
        c = _Call.of(args, cast(dict[str, Any], kw))
        journals = _journals(table, user) if table else []
        if journals:
            return _recorded(_opened(c, journals), source)
        return _until_recorded(table, user, c, source)
    return method


def _journals(table: PerturbationTable, user: UserInfo) -> list[Journal]:
    effective = table.for_user(user)
    return table.journals(effective) if effective is not None else []


def _opened(c: _Call, journals: list[Journal]) -> WatchNote:
    """Journal a watch (from now on) and return its note."""
    info = lookup(c.resource)
    note = WatchNote(next_watch_id(), info, journals)
    entry = watch_entry(note.watch_id, info, c.namespace, kw=c.kw)
    for journal in journals:
        journal.add("watch", entry)
    return note


async def _until_recorded(table: PerturbationTable, user: UserInfo, c: _Call,
                          source: AsyncIterator[list[WatchEvent]]
                          ) -> AsyncIterator[list[WatchEvent]]:
    events = aiter(source)
    try:
        async for batch in _steps(events):
            journals = _journals(table, user) if table else []
            if journals:
                async for out in _recorded(_opened(c, journals), _prepend(batch, events)):
                    yield out
                return
            yield batch
    finally:
        await _close(events)


async def _steps(events: AsyncIterator[list[WatchEvent]]
                 ) -> AsyncIterator[list[WatchEvent]]:
    """`events`, step by step, without closing it when left (its owner does)."""
    while True:
        try:
            batch = await anext(events)
        except StopAsyncIteration:
            return
        yield batch


async def _prepend(first: list[WatchEvent], rest: AsyncIterator[list[WatchEvent]]
                   ) -> AsyncIterator[list[WatchEvent]]:
    """`first`, then the rest of a stream already being read."""
    yield first
    async for batch in _steps(rest):
        yield batch
    await _close(rest)


async def _close(events: AsyncIterator[list[WatchEvent]]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:  # the watch cache's watcher goes with the client's stream
        await close()


async def _recorded(note: WatchNote, source: AsyncIterator[list[WatchEvent]]
                    ) -> AsyncIterator[list[WatchEvent]]:
    events = aiter(source)
    try:
        while True:
            # set before each step: whichever task (context) steps this generator, the
            # store's generator beneath runs in it and finds the note
            current_watch.set(note)
            try:
                batch = await anext(events)
            except StopAsyncIteration:
                return
            for ev in batch:
                if ev.type != "BOOKMARK":
                    note.event(ev.type, ev.object, ev.revision, "delivered")
            yield batch
    finally:
        current_watch.set(None)
        await _close(events)
