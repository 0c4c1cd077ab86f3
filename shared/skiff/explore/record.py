"""What the controller under test did, as the apiserver recorded it (a Perturbation with
`record: true`; its `record` subresource): the reads it made, the watch events it was
delivered (or missed, or had held back), the writes it committed and the crashes it was
given. A `Trace` answers the questions the plan and the report ask of it: which writes
followed which decision, and how two runs' writes differ.

Names made from `generateName` differ between runs, so a write's key masks them
(`db-x7f2k` → `db-*`); every other part of the key is the same in two runs that made the
same decisions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from skiff.api.types import Obj

__all__ = ["Trace", "Write", "WriteKey", "describe", "is_cached_read", "write_delta"]

# The controller's own view of the Perturbations is not part of what it decides on.
_IGNORED = frozenset({"perturbations.skiff.io", "perturbations"})


def _masked(name: str, generate_name: str) -> str:
    return f"{generate_name}*" if generate_name and name.startswith(generate_name) else name


@dataclass(frozen=True, order=True)
class WriteKey:
    """A write as two runs compare it: verb, resource, namespace, name (generated names
    masked) and subresource."""

    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str = ""

    def text(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub} {where}"


@dataclass(frozen=True)
class Write:
    seq: int
    time: float
    revision: int
    key: WriteKey
    name: str  # the real name (the key's may be masked)

    def text(self) -> str:
        return f"{self.key.text()} (revision {self.revision})"


def is_cached_read(entry: Obj) -> bool:
    """A read that allows a cached answer: resourceVersion "0" or NotOlderThan."""
    return entry.get("op") == "read" and (
        str(entry.get("resourceVersion") or "") == "0"
        or entry.get("resourceVersionMatch") == "NotOlderThan")


def _where(entry: Obj) -> str:
    ns, name = str(entry.get("namespace") or ""), str(entry.get("name") or "")
    if not name:
        return f" in {ns}" if ns else ""
    return f" {ns}/{name}" if ns else f" {name}"


def describe(entry: Obj) -> str:
    """One line for a user: what this entry of the record says."""
    op, resource = entry.get("op"), entry.get("resource", "")
    if op == "read":
        rv = entry.get("resourceVersion")
        how = f"resourceVersion={rv}" if rv not in (None, "") else "consistent"
        text = f"{entry.get('verb')} {resource}{_where(entry)} ({how})"
        if entry.get("labelSelector"):
            text += f" -l {entry['labelSelector']}"
        served, head = entry.get("servedRevision"), entry.get("headRevision")
        text += f" served at revision {served}"
        if entry.get("stale") or (served and head and served < head):
            text += f" while the head was {head} (stale)"
        if entry.get("verb") == "list":
            items = entry.get("items") or []
            text += f": {len(items)} item{'s' if len(items) != 1 else ''}"
        elif "found" in entry:
            text += ": found" if entry.get("found") else ": not found"
        return text
    if op == "event":
        fate = entry.get("fate", "delivered")
        return (f"{entry.get('type')} event of {resource}{_where(entry)} "
                f"(revision {entry.get('revision')}) {fate}")
    if op == "write":
        return (f"{entry.get('verb')} {resource}"
                f"{'/' + entry['subresource'] if entry.get('subresource') else ''}"
                f"{_where(entry)} (revision {entry.get('revision')})")
    if op == "watch":
        return f"watch {resource}{_where(entry)} from resourceVersion " \
               f"{entry.get('resourceVersion') or '(now)'}"
    if op == "crash":
        return f"crash at revision {entry.get('revision')}: {entry.get('message', '')}"
    return str(op)


class Trace:
    """One run's record, from the point the workload's steps began (`start_seq`: entries
    at or before it happened while the controller started up)."""

    def __init__(self, entries: Sequence[Obj], *, start_seq: int = 0) -> None:
        self.entries = sorted((e for e in entries
                               if str(e.get("resource") or "") not in _IGNORED),
                              key=lambda e: int(e.get("seq") or 0))
        self.start_seq = start_seq
        self._generated: dict[tuple[str, str, str], str] = {}
        for e in self.entries:
            if e.get("op") == "write" and e.get("generateName"):
                name = str(e.get("name") or "")
                self._generated[(str(e.get("resource")), str(e.get("namespace") or ""),
                                 name)] = _masked(name, str(e["generateName"]))

    def masked_name(self, resource: str, namespace: str, name: str) -> str:
        """`name` with a generated suffix masked, as the controller's own creates made it."""
        return self._generated.get((resource, namespace, name), name)

    def writes(self, *, after_start: bool = True) -> list[Write]:
        out = []
        for e in self.entries:
            if e.get("op") != "write" or (after_start and int(e["seq"]) <= self.start_seq):
                continue
            if e.get("code") not in (None, 200, 201):  # a failed attempt, not a write
                continue
            resource, ns = str(e.get("resource")), str(e.get("namespace") or "")
            name = str(e.get("name") or "")
            key = WriteKey(str(e.get("verb")), resource, ns,
                           self.masked_name(resource, ns, name),
                           str(e.get("subresource") or ""))
            out.append(Write(int(e["seq"]), float(e.get("time") or 0),
                             int(e.get("revision") or 0), key, name))
        return out

    def write_counts(self) -> Counter[WriteKey]:
        return Counter(w.key for w in self.writes())

    def decision_before(self, seq: int) -> Obj | None:
        """The last read or delivered event before `seq`: what the decision to write at
        `seq` was made on (None: nothing was read since the start)."""
        for e in reversed(self.entries):
            if int(e["seq"]) >= seq:
                continue
            if e.get("op") == "read" or (e.get("op") == "event"
                                         and e.get("fate", "delivered") == "delivered"):
                return e
        return None

    def events(self, *, fates: Iterable[str] = ("delivered",)) -> list[Obj]:
        wanted = set(fates)
        return [e for e in self.entries if e.get("op") == "event"
                and int(e["seq"]) > self.start_seq
                and e.get("fate", "delivered") in wanted]

    def matching_event(self, like: Obj) -> Obj | None:
        """This run's entry for the same event as `like` (another run's): same resource,
        type and object; the first one after the start."""
        for e in self.entries:
            if e.get("op") == "event" and int(e["seq"]) > self.start_seq and all(
                    e.get(k) == like.get(k) for k in ("resource", "type", "namespace",
                                                        "name")):
                return e
        return None

    def crashes(self) -> list[Obj]:
        return [e for e in self.entries if e.get("op") == "crash"]

    def next_seq_after(self, time: float) -> int:
        """The last seq recorded at or before `time` (to mark where the steps began)."""
        last = 0
        for e in self.entries:
            if float(e.get("time") or 0) <= time:
                last = max(last, int(e["seq"]))
        return last


def write_delta(reference: Trace, test: Trace) -> tuple[list[Write], list[Write]]:
    """The test run's writes beyond the reference run's (in order), and the reference
    run's writes the test run did not make: multisets of keys, so order differences
    between the runs do not count."""
    left = reference.write_counts()
    extra = []
    for w in test.writes():
        if left[w.key] > 0:
            left[w.key] -= 1
        else:
            extra.append(w)
    have = test.write_counts()
    missing = []
    for w in reference.writes():
        if have[w.key] > 0:
            have[w.key] -= 1
        else:
            missing.append(w)
    return extra, missing
