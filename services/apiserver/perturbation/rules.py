"""A Perturbation's spec as the apiserver applies it, and its pure decisions: whom it
targets, which revision a stale view serves (pinned, lagging by revisions, or by seconds
given a ring of revision timestamps), which watch events it drops or coalesces.

No I/O and no clock of its own: the caller passes the head revision and the time, so the
decisions are unit-tested with a fake clock.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Mapping
from dataclasses import dataclass

from skiff.api.kinds import KindInfo
from skiff.api.types import ObjView
from skiff.apiserver.perturbation.crash import CrashOnWrite, parse_crash
from skiff.apiserver.storage.watchcache import WatchEvent

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True)
class StaleView:
    """Exactly one of: a pinned revision, a lag in revisions, a lag in seconds, or pinned
    from the identity's own `from_write`-th committed write (at that write's revision - 1;
    the present until then)."""

    revision: int = 0
    lag_revisions: int = 0
    lag_seconds: float = 0.0
    from_write: int = 0

    @property
    def pinned(self) -> bool:
        return self.revision > 0


@dataclass(frozen=True)
class MissedEvents:
    """Which events a watcher misses; empty tuples match everything."""

    resources: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    coalesce_seconds: float = 0.0

    def matches(self, info: KindInfo, ev: WatchEvent) -> bool:
        if ev.type not in EVENT_TYPES:
            return False  # bookmarks are never missed
        if self.types and ev.type not in self.types:
            return False
        if self.resources and info.resource not in self.resources and (
                not info.group or f"{info.resource}.{info.group}" not in self.resources):
            return False
        if self.names:
            meta = ev.object.get("metadata") or {}
            name = str(meta.get("name") or "")
            qualified = f"{meta.get('namespace') or ''}/{name}"
            if name not in self.names and qualified not in self.names:
                return False
        return True


@dataclass(frozen=True)
class Rule:
    """One stored Perturbation, parsed."""

    name: str
    user: str = ""
    group: str = ""
    stale: StaleView | None = None
    missed: MissedEvents | None = None
    crash: CrashOnWrite | None = None
    uid: str = ""
    crashed: bool = False  # status.crashes records that it fired (once per object)
    record: bool = False  # journal the identity's requests (journal.py)


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(
        value, bool) else 0.0


def parse(obj: ObjView) -> Rule | None:
    """The rule of a stored Perturbation (None when it targets nobody or asks nothing;
    validation refuses such objects, this only keeps a bad one from doing harm)."""
    spec = obj.get("spec") or {}
    subject = spec.get("subject") or {}
    user, group = str(subject.get("user") or ""), str(subject.get("group") or "")
    if bool(user) == bool(group):
        return None
    stale = None
    view = spec.get("staleView")
    if isinstance(view, dict):
        stale = StaleView(revision=int(_number(view.get("revision"))),
                          lag_revisions=int(_number(view.get("lagRevisions"))),
                          lag_seconds=_number(view.get("lagSeconds")),
                          from_write=int(_number(view.get("fromWrite"))))
        if not (stale.revision or stale.lag_revisions or stale.lag_seconds
                or stale.from_write):
            stale = None
    missed = None
    events = spec.get("missedEvents")
    if isinstance(events, dict):
        missed = MissedEvents(resources=_strings(events.get("resources")),
                              types=_strings(events.get("types")),
                              names=_strings(events.get("names")),
                              coalesce_seconds=_number(events.get("coalesceSeconds")))
    crash = parse_crash(spec)
    record = spec.get("record") is True
    if stale is None and missed is None and crash is None and not record:
        return None
    meta = obj.get("metadata") or {}
    return Rule(str(meta.get("name") or ""), user, group, stale, missed, crash,
                uid=str(meta.get("uid") or ""),
                crashed=bool((obj.get("status") or {}).get("crashes")), record=record)


class RevisionTimes:
    """A ring of (monotonic time, revision) samples of the head: which revision was the
    newest at least N seconds ago."""

    def __init__(self, *, size: int = 8192) -> None:
        self._times: collections.deque[float] = collections.deque(maxlen=size)
        self._revisions: collections.deque[int] = collections.deque(maxlen=size)

    def record(self, *, revision: int, now: float) -> None:
        if self._revisions and self._revisions[-1] >= revision:
            return
        self._times.append(now)
        self._revisions.append(revision)

    def newest_before(self, when: float) -> int:
        """The newest revision seen at or before `when` (the oldest known if none is that
        old; 0 when nothing was recorded)."""
        if not self._times:
            return 0
        i = bisect.bisect_right(self._times, when)
        return self._revisions[max(i - 1, 0)]


def view_revision(stale: StaleView, *, head: int, times: RevisionTimes, now: float,
                  pinned: int = 0) -> int:
    """The revision a stale view serves now (at least 1; 0 for a `from_write` view whose
    write has not come: `pinned` is where it was pinned then)."""
    if stale.from_write:
        return max(pinned, 1) if pinned else 0
    if stale.pinned:
        return stale.revision
    if stale.lag_revisions:
        return max(head - stale.lag_revisions, 1)
    return max(min(times.newest_before(now - stale.lag_seconds) or head, head), 1)


@dataclass(frozen=True)
class Effective:
    """What applies to one user: the rules that target them (by name or by group)."""

    rules: tuple[Rule, ...]

    @property
    def stale(self) -> tuple[StaleView, ...]:
        return tuple(r.stale for r in self.rules if r.stale is not None)

    @property
    def recording(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.record)

    @property
    def from_write(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.stale is not None and r.stale.from_write)

    @property
    def missed(self) -> tuple[MissedEvents, ...]:
        return tuple(r.missed for r in self.rules if r.missed is not None)

    @property
    def crashes(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.crash is not None and not r.crashed)

    def view(self, *, head: int, times: RevisionTimes, now: float,
             pins: Mapping[str, int] | None = None) -> int:
        """The stalest view of every rule (0: the present, no stale view); `pins`: the
        revision each `from_write` rule (by uid) was pinned at."""
        views = [view_revision(r.stale, head=head, times=times, now=now,
                               pinned=(pins or {}).get(r.uid, 0))
                 for r in self.rules if r.stale is not None]
        views = [v for v in views if v]
        return min(views) if views else 0

    def stalest(self, *, head: int, times: RevisionTimes, now: float,
                pins: Mapping[str, int] | None = None) -> Rule | None:
        """The rule whose view `view` serves (None: no stale view now)."""
        found: tuple[int, Rule] | None = None
        for r in self.rules:
            if r.stale is None:
                continue
            v = view_revision(r.stale, head=head, times=times, now=now,
                              pinned=(pins or {}).get(r.uid, 0))
            if v and (found is None or v < found[0]):
                found = (v, r)
        return found[1] if found else None

    def missing(self, info: KindInfo, ev: WatchEvent) -> MissedEvents | None:
        """The first missed-events rule `ev` matches (None: deliver it)."""
        return next((m for m in self.missed if m.matches(info, ev)), None)
