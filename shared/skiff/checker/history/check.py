"""The checker: every anomaly a recorded history shows, counted by kind, with examples.

Pure (no I/O). Kinds, and why each is forbidden or not:

- `lost-write`: an acknowledged write whose version is not in its key's chain. With
  compare-and-set every applied write names the version it replaced (its precondition), so
  walking back from the newest version anyone observed gives the versions that really
  followed one another; an acknowledged version outside that chain was lost (or forked).
- `stale-read`: a consistent read (no resourceVersion) returned a version older than one a
  write acknowledged before the read was invoked (linearizability, real-time order).
- `real-time-order`: a consistent read returned a version older than one another
  consistent read had returned before this read was invoked (reads going back in time).
- `wrong-value`: two sources disagree about the value of one version of a key.
- `watch-gap`, `watch-duplicate`, `watch-reorder`: a watcher skipped a version of a key
  that lies inside the revision range it covered, delivered a version twice, or delivered
  a revision not above the one before (a resumed watch continues the same sequence).
- `stale-cached-read` (allowed): a `resourceVersion=0` read older than an acknowledged
  write, as Kubernetes allows a cache to answer.
"""

from __future__ import annotations

import bisect
import datetime
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from skiff.checker.history.model import (
    CACHED_READ,
    OK,
    READ,
    WRITE,
    History,
    Op,
    WatchRecord,
)

__all__ = ["ALLOWED", "FORBIDDEN", "Anomaly", "Report", "check", "clock", "describe_op"]

FORBIDDEN = ("lost-write", "stale-read", "real-time-order", "wrong-value", "watch-gap",
             "watch-duplicate", "watch-reorder")
ALLOWED = ("stale-cached-read",)
RESTART = "RESTART"
BOOKMARK = "BOOKMARK"


@dataclass(frozen=True)
class Anomaly:
    kind: str
    key: str
    message: str
    involved: tuple[str, ...] = ()  # the operations or events, described


@dataclass
class Report:
    anomalies: list[Anomaly] = field(default_factory=list)
    ops: int = 0
    watch_events: int = 0

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for anomaly in self.anomalies:
            counts[anomaly.kind] += 1
        return dict(counts)

    def of(self, kind: str) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind]

    @property
    def forbidden(self) -> int:
        return sum(1 for a in self.anomalies if a.kind in FORBIDDEN)

    def format(self, *, examples: int = 3) -> str:
        counts = self.counts()
        lines = [f"{self.ops} operations, {self.watch_events} watch events checked"]
        for kind in (*FORBIDDEN, *ALLOWED):
            note = " (allowed)" if kind in ALLOWED else ""
            lines.append(f"  {kind + note:<28} {counts.get(kind, 0)}")
            for anomaly in self.of(kind)[:examples]:
                lines.append(f"    - {anomaly.key}: {anomaly.message}")
                lines.extend(f"        {line}" for line in anomaly.involved)
        lines.append(f"{self.forbidden} forbidden anomal{'y' if self.forbidden == 1 else 'ies'}"
                     f"{'' if self.forbidden else ': the history is consistent'}")
        return "\n".join(lines)


def clock(t: float) -> str:
    """A wall-clock time as logs and `skiff chaos` print it (UTC, milliseconds), so an
    anomaly can be lined up with the fault injected then."""
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%H:%M:%S.%f")[:-3]


def describe_op(op: Op) -> str:
    what = {WRITE: f"write {op.value!r} if rv={op.prev_rv}", READ: "read",
            CACHED_READ: "read rv=0"}.get(op.kind, op.kind)
    got = f" -> rv={op.rv} {op.value!r}" if op.kind != WRITE else f" -> rv={op.rv}"
    server = f" via {op.server}" if op.server else ""
    return (f"p{op.process} {what}{got} {op.outcome}{server} "
            f"[{clock(op.invoke)} .. {clock(op.complete)}]")


def _describe_event(ev: WatchRecord) -> str:
    server = f" via {ev.server}" if ev.server else ""
    return f"watcher w{ev.watcher} {ev.type} rv={ev.rv} {ev.value!r}{server} at {clock(ev.time)}"


def check(history: History) -> Report:
    report = Report(ops=len(history.ops),
                    watch_events=sum(1 for w in history.watch if w.type != RESTART))
    versions = _versions(history, report)
    chains = _chains(history, versions)
    report.anomalies.extend(_lost_writes(history.ops, chains))
    report.anomalies.extend(_stale_reads(history.ops))
    known: set[tuple[str, int]] = {(k, rv) for k, chain in chains.items() for rv in chain}
    known |= {(k, rv) for k, by_rv in versions.items() for rv in by_rv}
    report.anomalies.extend(_watch_anomalies(history.watch, known))
    return report


def _observations(history: History) -> Iterable[tuple[str, int, str | None, str]]:
    """Every (key, rv, value, source) a read, a watch event or the final list showed."""
    for op in history.ops:
        if op.kind in (READ, CACHED_READ) and op.outcome == OK and op.rv is not None:
            yield op.key, op.rv, op.value, describe_op(op)
    for ev in history.watch:
        if ev.type not in (RESTART, BOOKMARK, "DELETED"):
            yield ev.key, ev.rv, ev.value, _describe_event(ev)
    for obs in history.final:
        yield obs.key, obs.rv, obs.value, f"final list rv={obs.rv} {obs.value!r}"


def _versions(history: History, report: Report) -> dict[str, dict[int, str | None]]:
    """key → rv → value, as observed; disagreements are `wrong-value` anomalies."""
    versions: dict[str, dict[int, str | None]] = defaultdict(dict)
    first: dict[tuple[str, int], str] = {}
    for key, rv, value, source in _observations(history):
        if rv in versions[key] and versions[key][rv] != value:
            report.anomalies.append(Anomaly(
                "wrong-value", key, f"rv={rv} read as {versions[key][rv]!r} and {value!r}",
                (first[(key, rv)], source)))
            continue
        versions[key][rv] = value
        first.setdefault((key, rv), source)
    for op in history.ops:  # acknowledged writes say what their version holds
        if op.kind == WRITE and op.outcome == OK and op.rv is not None:
            seen = versions[op.key].get(op.rv, op.value)
            if seen != op.value:
                report.anomalies.append(Anomaly(
                    "wrong-value", op.key, f"rv={op.rv} written as {op.value!r}, read as "
                    f"{seen!r}", (describe_op(op), first[(op.key, op.rv)])))
    return versions


def _chains(history: History, versions: dict[str, dict[int, str | None]]
            ) -> dict[str, set[int]]:
    """key → the versions that followed one another, walking back from the newest one
    observed through each write's precondition."""
    writes_by_value: dict[tuple[str, str | None], Op] = {}
    acked: dict[str, dict[int, str | None]] = defaultdict(dict)
    for op in history.ops:
        if op.kind == WRITE:
            writes_by_value[(op.key, op.value)] = op
            if op.outcome == OK and op.rv is not None:
                acked[op.key][op.rv] = op.value
    chains: dict[str, set[int]] = {}
    for key, by_rv in versions.items():
        if not by_rv:
            continue
        chain: set[int] = set()
        cur: int | None = max(by_rv)
        while cur is not None and cur not in chain:
            chain.add(cur)
            value = by_rv.get(cur, acked[key].get(cur))
            write = writes_by_value.get((key, value))
            cur = write.prev_rv if write is not None else None
        chains[key] = chain
    return chains


def _lost_writes(ops: list[Op], chains: dict[str, set[int]]) -> Iterable[Anomaly]:
    for op in ops:
        if op.kind != WRITE or op.outcome != OK or op.rv is None or op.key not in chains:
            continue
        if op.rv not in chains[op.key]:
            newest = max(chains[op.key])
            yield Anomaly("lost-write", op.key,
                          f"acknowledged rv={op.rv} {op.value!r} is not in the key's "
                          f"history (newest observed rv={newest})", (describe_op(op),))


class _Acks:
    """Per key, the newest version acknowledged by operations completed before a time."""

    def __init__(self, ops: Iterable[Op]) -> None:
        done = sorted((op for op in ops if op.rv is not None), key=lambda o: o.complete)
        self.times = [op.complete for op in done]
        self.best: list[Op] = []
        for op in done:
            prev = self.best[-1] if self.best else None
            self.best.append(op if prev is None or (op.rv or 0) > (prev.rv or 0) else prev)

    def before(self, t: float) -> Op | None:
        i = bisect.bisect_left(self.times, t)
        return self.best[i - 1] if i else None


def _stale_reads(ops: list[Op]) -> Iterable[Anomaly]:
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.outcome == OK:
            by_key[op.key].append(op)
    for key, key_ops in by_key.items():
        writes = _Acks(o for o in key_ops if o.kind == WRITE)
        reads = _Acks(o for o in key_ops if o.kind == READ)
        for op in key_ops:
            if op.kind not in (READ, CACHED_READ) or op.rv is None:
                continue
            write = writes.before(op.invoke)
            if write is not None and (write.rv or 0) > op.rv:
                kind = "stale-read" if op.kind == READ else "stale-cached-read"
                yield Anomaly(kind, key, f"read rv={op.rv}, older than rv={write.rv} "
                              "acknowledged before the read began",
                              (describe_op(op), describe_op(write)))
                continue
            earlier = reads.before(op.invoke)
            if earlier is not None and (earlier.rv or 0) > op.rv:
                kind = "real-time-order" if op.kind == READ else "stale-cached-read"
                yield Anomaly(kind, key, f"read rv={op.rv} after a read had returned "
                              f"rv={earlier.rv}", (describe_op(op), describe_op(earlier)))


def _watch_anomalies(records: list[WatchRecord], known: set[tuple[str, int]]
                     ) -> Iterable[Anomaly]:
    by_watcher: dict[int, list[WatchRecord]] = defaultdict(list)
    for rec in records:
        by_watcher[rec.watcher].append(rec)
    ordered = sorted(known, key=lambda kv: kv[1])
    revs = [rv for _, rv in ordered]
    for events in by_watcher.values():
        segment: list[WatchRecord] = []
        for rec in events:
            if rec.type == RESTART:
                yield from _segment(segment, ordered, revs)
                segment = [rec]
            else:
                segment.append(rec)
        yield from _segment(segment, ordered, revs)


def _segment(segment: list[WatchRecord], ordered: list[tuple[str, int]], revs: list[int]
             ) -> Iterable[Anomaly]:
    """One watcher from a (re)list at `start` on: the order of what it delivered, and every
    known version inside (start, last delivered] it did not deliver."""
    if not segment:
        return
    start = segment[0].rv if segment[0].type == RESTART else 0
    last, last_ev = start, segment[0]
    delivered: dict[tuple[str, int], WatchRecord] = {}
    for ev in segment:
        if ev.type == RESTART:
            continue
        if ev.type != BOOKMARK and (ev.key, ev.rv) in delivered:
            yield Anomaly("watch-duplicate", ev.key, f"rv={ev.rv} delivered twice",
                          (_describe_event(delivered[(ev.key, ev.rv)]), _describe_event(ev)))
        elif ev.rv < last or (ev.rv == last and ev.type != BOOKMARK):
            yield Anomaly("watch-reorder", ev.key, f"rv={ev.rv} delivered after rv={last}",
                          (_describe_event(last_ev), _describe_event(ev)))
        else:
            if ev.type != BOOKMARK:
                delivered[(ev.key, ev.rv)] = ev
            last, last_ev = ev.rv, ev
    lo, hi = bisect.bisect_right(revs, start), bisect.bisect_right(revs, last)
    for key, rv in ordered[lo:hi]:
        if (key, rv) not in delivered:
            after = [e for e in delivered.values() if e.rv > rv]
            before = [e for e in delivered.values() if e.rv < rv]
            involved = tuple(_describe_event(e) for e in
                             (max(before, key=lambda e: e.rv) if before else None,
                              min(after, key=lambda e: e.rv) if after else last_ev)
                             if e is not None)
            yield Anomaly("watch-gap", key, f"watcher w{segment[0].watcher} never delivered "
                          f"rv={rv} (its stream covered rv {start}..{last})", involved)
