"""The history a `skiff check history` run records: what each process did and saw, and when.

Times are wall-clock seconds (`time.time()`), so operations of different processes (and of
different apiservers) are ordered in real time: A precedes B when A completed before B was
invoked. Revisions are the objects' resourceVersions (etcd mod revisions, as integers).
Every written value is unique in a run, so a value names the write that made it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CACHED_READ", "FAIL", "History", "OK", "Observation", "Op", "READ", "UNKNOWN",
           "WRITE", "WatchRecord"]

WRITE = "write"          # update with a resourceVersion precondition (compare-and-set)
READ = "read"            # consistent get (no resourceVersion)
CACHED_READ = "cached-read"  # get with resourceVersion=0 (may be served from a cache)

OK = "ok"                # acknowledged
FAIL = "fail"            # definitely not applied (Conflict, NotFound, refused)
UNKNOWN = "unknown"      # timeout, 504, connection lost: it may or may not have happened


@dataclass(frozen=True)
class Op:
    """One operation of one process on one key.

    For a write: `value` is what it wrote, `prev_rv` its precondition and `rv` the new
    resourceVersion when acknowledged. For a read: `value` and `rv` are what it returned."""

    process: int
    kind: str
    key: str
    invoke: float
    complete: float
    outcome: str
    value: str | None = None
    rv: int | None = None
    prev_rv: int | None = None
    server: str = ""
    error: str = ""


@dataclass(frozen=True)
class WatchRecord:
    """One event a watcher delivered (BOOKMARKs included: they carry a revision only), or a
    `RESTART` mark: the watcher re-listed at `rv` (after 410 Gone or at its start) and its
    coverage begins again there. A resume from the last revision is no mark: the stream
    continues."""

    watcher: int
    type: str
    key: str
    rv: int
    value: str | None
    time: float
    server: str = ""


@dataclass(frozen=True)
class Observation:
    """A version of a key known to have existed (the final consistent list's items)."""

    key: str
    rv: int
    value: str | None


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    watch: list[WatchRecord] = field(default_factory=list)
    final: list[Observation] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"ops": [asdict(o) for o in self.ops],
                           "watch": [asdict(w) for w in self.watch],
                           "final": [asdict(f) for f in self.final]})

    @classmethod
    def from_json(cls, text: str) -> History:
        raw: dict[str, Any] = json.loads(text)
        return cls(ops=[Op(**o) for o in raw.get("ops", [])],
                   watch=[WatchRecord(**w) for w in raw.get("watch", [])],
                   final=[Observation(**f) for f in raw.get("final", [])])
