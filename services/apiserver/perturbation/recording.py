"""The store's read and watch hooks (issue 35): `@reads("get"|"list")` and `@watches` wrap
the registry's methods so that, for a user a Perturbation targets, a read that allows a
cached answer is served at its stale view, a stale read is marked on the request's span,
and a `record: true` Perturbation journals the read, the watch and each event delivered.

With no Perturbation stored a wrapped call costs one truth test (`self.perturbations`)
and hands back the method's own coroutine or generator, nothing wrapped around it. Only the
calls an endpoint makes for a client are journaled: they pass `allow_cached` (every
client get and list does); the registry's own reads (an update's current object, a
watch's initial list) do not.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from skiff.api import ApiError, Reason, lookup
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.journal import (
    WatchNote,
    current_watch,
    next_watch_id,
    read_entry,
    watch_entry,
)
from skiff.apiserver.perturbation.table import PerturbationTable
from skiff.apiserver.perturbation.traces import annotate
from skiff.apiserver.storage.watchcache import WatchEvent

P = ParamSpec("P")


class Perturbed(Protocol):
    """The registry, as the wrappers see it."""

    perturbations: PerturbationTable


R = TypeVar("R", bound=Perturbed)
Read = Callable[Concatenate[R, str, str | None, P], Awaitable[Obj]]
Watch = Callable[Concatenate[R, str, str | None, P], AsyncIterator[list[WatchEvent]]]


def reads(verb: str) -> Callable[[Read[R, P]], Read[R, P]]:
    """Wrap the registry's `get` or `list` (see the module doc)."""
    def wrap(fn: Read[R, P]) -> Read[R, P]:
        @functools.wraps(fn)
        def method(self: R, resource: str, namespace: str | None, /, *args: P.args,
                   **kw: P.kwargs) -> Awaitable[Obj]:
            if not self.perturbations:
                return fn(self, resource, namespace, *args, **kw)
            return _read(verb, cast(Callable[..., Awaitable[Obj]], fn), self, resource,
                         namespace, args, cast(dict[str, Any], kw))
        return cast(Read[R, P], method)
    return wrap


async def _read(verb: str, fn: Callable[..., Awaitable[Obj]], owner: Perturbed,
                resource: str, namespace: str | None, args: tuple[Any, ...],
                kw: dict[str, Any]) -> Obj:
    table = owner.perturbations
    effective = table.for_user(current_user.get())
    if effective is None:
        return await fn(owner, resource, namespace, *args, **kw)
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
        return await fn(owner, resource, namespace, *args, **call)
    info = lookup(resource)
    name = str(args[0] if args else kw.get("name") or "") if verb == "get" else ""
    try:
        result: Obj | None = await fn(owner, resource, namespace, *args, **call)
    except ApiError as err:
        if verb != "get" or err.reason != Reason.NOT_FOUND:
            raise
        result = None
        _journal(journals, verb, info, namespace, name, kw, served or head, head, stale,
                 result)
        raise
    assert result is not None
    if verb == "list":
        served = int((result.get("metadata") or {}).get("resourceVersion") or 0)
    _journal(journals, verb, info, namespace, name, kw, served or head, head, stale, result)
    return result


def _journal(journals: list[Any], verb: str, info: KindInfo, namespace: str | None,
             name: str, kw: dict[str, Any], served: int, head: int, stale: bool,
             result: Obj | None) -> None:
    entry = read_entry(verb, info, namespace, name, kw=kw, served=served, head=head,
                       stale=stale, result=result)
    for journal in journals:
        journal.add("read", entry)


def watches(fn: Watch[R, P]) -> Watch[R, P]:
    """Wrap the registry's `watch_batches` (see the module doc)."""
    @functools.wraps(fn)
    def method(self: R, resource: str, namespace: str | None, /, *args: P.args,
               **kw: P.kwargs) -> AsyncIterator[list[WatchEvent]]:
        source = fn(self, resource, namespace, *args, **kw)
        if not self.perturbations:
            return source
        effective = self.perturbations.for_user(current_user.get())
        journals = self.perturbations.journals(effective) if effective is not None else []
        if not journals:
            return source
        info = lookup(resource)
        note = WatchNote(next_watch_id(), info, journals)
        entry = watch_entry(note.watch_id, info, namespace, kw=cast(dict[str, Any], kw))
        for journal in journals:
            journal.add("watch", entry)
        return _recorded(note, source)
    return cast(Watch[R, P], method)


async def _recorded(note: WatchNote, source: AsyncIterator[list[WatchEvent]]
                    ) -> AsyncIterator[list[WatchEvent]]:
    current_watch.set(note)  # this task serves this one watch from here on
    try:
        async for batch in source:
            for ev in batch:
                if ev.type != "BOOKMARK":
                    note.event(ev.type, ev.object, ev.revision, "delivered")
            yield batch
    finally:
        current_watch.set(None)
