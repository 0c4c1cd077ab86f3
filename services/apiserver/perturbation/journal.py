"""What one identity asked of this apiserver, kept for a Perturbation with `record: true`
(issue 35: `skiff explore` learns a controller's reads, watch deliveries and writes from
the apiserver's side, with no instrumentation of the controller).

A `Journal` holds the newest `LIMIT` entries of one Perturbation on this apiserver
(numbered `seq` 1, 2, ...; `dropped` counts the older ones that went); the entry builders
turn a served read, a watch event or a committed write into the JSON dicts the
`perturbations/NAME/record` subresource returns (`PerturbationRecord`). Pure apart from
the wall clock passed in: unit-tested with plain dicts.
"""

from __future__ import annotations

import collections
import itertools
import time
from contextvars import ContextVar
from typing import Any

from skiff.api.kinds import KindInfo
from skiff.api.types import Obj, ObjView

LIMIT = 50_000  # entries kept per Perturbation per apiserver
MAX_ITEMS = 500  # items named by one list entry
_watch_ids = itertools.count(1)


def next_watch_id() -> int:
    """A watch's id, unique in this apiserver process."""
    return next(_watch_ids)


def resource_name(info: KindInfo) -> str:
    """`configmaps`, `deployments.apps`, `databases.examples.skiff.io`."""
    return f"{info.resource}.{info.group}" if info.group else info.resource


class Journal:
    """The newest `limit` entries of one Perturbation (see the module doc)."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._entries: collections.deque[Obj] = collections.deque(maxlen=limit)
        self._seq = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, op: str, fields: Obj, *, now: float | None = None) -> Obj:
        """Append one entry (`seq`, `time`, `op`, then `fields`) and return it."""
        self._seq += 1
        if len(self._entries) == self._entries.maxlen:
            self.dropped += 1
        entry: Obj = {"seq": self._seq, "time": time.time() if now is None else now,
                      "op": op, **fields}
        self._entries.append(entry)
        return entry

    def since(self, seq: int = 0) -> list[Obj]:
        """The entries with a `seq` greater than `seq`, oldest first."""
        if seq <= 0:
            return list(self._entries)
        first = self._entries[0]["seq"] if self._entries else 0
        skip = max(seq - first + 1, 0)
        return list(itertools.islice(self._entries, skip, None))


def record_object(name: str, *, apiserver: str, journal: Journal | None,
                  since_seq: int = 0) -> Obj:
    """The `PerturbationRecord` answered for `perturbations/NAME/record`."""
    return {"apiVersion": "skiff.io/v1", "kind": "PerturbationRecord",
            "metadata": {"name": name}, "apiserver": apiserver,
            "dropped": journal.dropped if journal is not None else 0,
            "entries": journal.since(since_seq) if journal is not None else []}


def _selectors(kw: dict[str, Any]) -> Obj:
    out: Obj = {}
    if kw.get("label_selector"):
        out["labelSelector"] = kw["label_selector"]
    if kw.get("field_selector"):
        out["fieldSelector"] = kw["field_selector"]
    return out


def _ref(obj: ObjView) -> Obj:
    meta = obj.get("metadata") or {}
    return {"namespace": meta.get("namespace") or "", "name": meta.get("name") or "",
            "resourceVersion": str(meta.get("resourceVersion") or "")}


def read_entry(verb: str, info: KindInfo, namespace: str | None, name: str, *,
               kw: dict[str, Any], served: int, head: int, stale: bool,
               result: ObjView | None) -> Obj:
    """A served get or list (`result`: the object or list; None: a get found nothing).
    `kw`: the registry call's keywords, from which the request's resourceVersion is told
    (`allow_cached` with no revision: "0"; with one: NotOlderThan it)."""
    revision = int(kw.get("revision") or 0)
    cached = bool(kw.get("allow_cached"))
    entry: Obj = {"verb": verb, "resource": resource_name(info),
                  "namespace": namespace or "", "name": name,
                  "resourceVersion": str(revision) if revision else ("0" if cached else "")}
    if cached and revision:
        entry["resourceVersionMatch"] = "NotOlderThan"
    entry.update(servedRevision=served, headRevision=head, stale=stale, **_selectors(kw))
    if verb == "list" and result is not None:
        items = result.get("items") or []
        entry["items"] = [_ref(item) for item in items[:MAX_ITEMS]]
        if len(items) > MAX_ITEMS:
            entry["truncated"] = True
    elif verb == "get":
        entry["found"] = result is not None
        meta = (result.get("metadata") or {}) if result is not None else {}
        entry["objectRevision"] = int(meta.get("resourceVersion") or 0)
    return entry


def watch_entry(watch_id: int, info: KindInfo, namespace: str | None, *,
                kw: dict[str, Any]) -> Obj:
    """A watch opened (`kw`: the registry's watch keywords)."""
    return {"watchId": watch_id, "resource": resource_name(info),
            "namespace": namespace or "", "name": kw.get("name") or "",
            "resourceVersion": str(kw.get("resource_version") or ""), **_selectors(kw)}


def event_entry(watch_id: int, info: KindInfo, *, type_: str, obj: ObjView, revision: int,
                fate: str) -> Obj:
    """One event of a recorded watch: `fate` delivered|missed|held|coalesced."""
    meta = obj.get("metadata") or {}
    return {"watchId": watch_id, "resource": resource_name(info), "type": type_,
            "namespace": meta.get("namespace") or "", "name": meta.get("name") or "",
            "revision": revision, "fate": fate}


def write_entry(info: KindInfo, verb: str, obj: ObjView, *, subresource: str = "") -> Obj:
    """A committed write of `obj` (as stored, or as it was when deleted)."""
    meta = obj.get("metadata") or {}
    entry: Obj = {"verb": verb, "subresource": subresource, "resource": resource_name(info),
                  "namespace": meta.get("namespace") or "", "name": meta.get("name") or "",
                  "revision": int(meta.get("resourceVersion") or 0)}
    if meta.get("generateName"):
        entry["generateName"] = meta["generateName"]
    return entry


class WatchNote:
    """One recorded watch (its id and the journals it is written to), as the perturbed
    stream beneath it sees it through `current_watch`."""

    def __init__(self, watch_id: int, info: KindInfo, journals: list[Journal]) -> None:
        self.watch_id = watch_id
        self.info = info
        self.journals = journals

    def event(self, type_: str, obj: ObjView, revision: int, fate: str) -> None:
        entry = event_entry(self.watch_id, self.info, type_=type_, obj=obj,
                            revision=revision, fate=fate)
        for journal in self.journals:
            journal.add("event", entry)


# The recorded watch being served in this task (None: none): set by the store's watch
# wrapper (recording.py), read by the table when it wraps the stream and by the read
# wrapper (a watch's own initial list is not a read of the client's).
current_watch: ContextVar[WatchNote | None] = ContextVar("skiff_recorded_watch",
                                                         default=None)
