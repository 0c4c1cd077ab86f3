"""One perturbed watcher's held events, in resourceVersion order (pure, fake-clock
tested).

Events arrive in revision order and leave in that order: an event later than the stale
view's revision is held until the view reaches it; a missed event is dropped, or (with
`coalesceSeconds`) held until its delay has passed, later events of the same object
replacing it so only the latest state leaves. An event behind a held one waits for it, so
nothing is ever delivered out of order.

`note(event, fate)`, when given, hears each change made to the stream: `missed`,
`coalesced` (replaced by a later state), `held` (kept back by the view or a delay).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from skiff.api.kinds import KindInfo
from skiff.apiserver.perturbation.rules import Effective
from skiff.apiserver.storage.watchcache import WatchEvent

Note = Callable[[WatchEvent, str], None]


@dataclass(eq=False)
class _Held:
    event: WatchEvent
    due: float  # monotonic time before which it may not leave (0: now)
    key: str = ""  # a coalescing group's object (namespace/name)
    first_type: str = ""  # the group's first event's type


def _key(ev: WatchEvent) -> str:
    meta = ev.object.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class HeldEvents:
    """The events of one watch that have not left yet (see the module doc)."""

    def __init__(self, info: KindInfo, note: Note | None = None) -> None:
        self.info = info
        self.note = note
        self._fresh: list[_Held] = []  # admitted since the last release, no fate told
        self._pending: collections.deque[_Held] = collections.deque()
        self._groups: dict[str, _Held] = {}  # object → its coalescing entry in _pending
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._pending)

    def admit(self, ev: WatchEvent, effective: Effective, *, view: int, now: float) -> None:
        """Take one event from the watch cache."""
        if ev.type == "BOOKMARK":
            # A bookmark never passes the view, nor a held event (it would promise them).
            if not self._pending and (not view or ev.revision <= view):
                self._pending.append(_Held(ev, 0.0))
            return
        rule = effective.missing(self.info, ev)
        key = _key(ev)
        if rule is None:
            self._groups.pop(key, None)  # a group never straddles a delivered change
            self._pending.append(_Held(ev, 0.0))
            if self.note is not None:
                self._fresh.append(self._pending[-1])
            return
        if rule.coalesce_seconds <= 0:
            self.dropped += 1
            self._tell(ev, "missed")
            return
        old = self._groups.pop(key, None)
        if old is None:
            held = _Held(ev, now + rule.coalesce_seconds, key, ev.type)
        else:
            self._pending.remove(old)
            self.dropped += 1
            self._tell(old.event, "coalesced")
            if old.first_type == "ADDED" and ev.type == "DELETED":
                self._tell(ev, "coalesced")
                return  # the watcher never saw it: nothing to tell
            kind = "ADDED" if old.first_type == "ADDED" else ev.type
            held = _Held(WatchEvent(kind, ev.object, ev.revision), old.due, key,
                         old.first_type)
        self._groups[key] = held
        self._pending.append(held)
        self._tell(held.event, "held")

    def _tell(self, ev: WatchEvent, fate: str) -> None:
        if self.note is not None:
            self.note(ev, fate)

    def release(self, *, view: int, now: float) -> list[WatchEvent]:
        """The events that may leave now, in order (`view` 0: no stale view)."""
        out: list[WatchEvent] = []
        while self._pending:
            head = self._pending[0]
            if view and head.event.revision > view or head.due > now:
                break
            self._pending.popleft()
            if head.key and self._groups.get(head.key) is head:
                del self._groups[head.key]
            out.append(head.event)
        if self._fresh:
            left = {id(h) for h in self._pending}
            for h in self._fresh:
                if id(h) in left:
                    self._tell(h.event, "held")
            self._fresh.clear()
        return out

    def release_all(self) -> list[WatchEvent]:
        """Every held event, in order (the Perturbation is gone)."""
        out = [h.event for h in self._pending]
        self._pending.clear()
        self._fresh.clear()
        self._groups.clear()
        return out

    def next_due(self) -> float:
        """The earliest time a held event's delay ends (0: none waits on a delay)."""
        return min((h.due for h in self._pending if h.due), default=0.0)
