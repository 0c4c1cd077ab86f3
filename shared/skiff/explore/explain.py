"""The faulty decision of a test run that diverged, in the words of the record: the write
the reference run did not make (or the one it made that this run did not), the read or
event the controller decided on just before, whether that read was stale — and which
objects it could not see, read from etcd's event log at the head revision of that moment
— and the crash the test gave it.
"""

from __future__ import annotations

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.explore.record import Trace, Write, describe, write_delta

__all__ = ["explain"]

_DECISIVE = ("create", "delete")  # a second child, a leak: what end states show


def _first(writes: list[Write]) -> Write | None:
    decisive = [w for w in writes if w.key.verb in _DECISIVE]
    chosen = decisive or writes
    return chosen[0] if chosen else None


async def _unseen(api: ApiClient, read: Obj) -> str:
    """For a stale list: the objects the head revision held that the read did not show."""
    head = int(read.get("headRevision") or 0)
    served = int(read.get("servedRevision") or 0)
    if read.get("verb") != "list" or not head or served >= head:
        return ""
    shown = {(i.get("namespace") or "", i.get("name")) for i in read.get("items") or []}
    try:
        at_head = await api.list(str(read["resource"]), read.get("namespace") or None,
                                 label_selector=str(read.get("labelSelector") or ""),
                                 revision=head)
    except ApiError as err:
        return f"    (the event log no longer answers for revision {head}: {err.message})"
    unseen = [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/")
              for o in at_head.get("items") or []
              if (o["metadata"].get("namespace") or "", o["metadata"]["name"]) not in shown]
    if not unseen:
        return ""
    return (f"    at revision {head} it would have seen {len(unseen)} more: "
            f"{', '.join(unseen[:8])}{' …' if len(unseen) > 8 else ''}")


async def explain(api: ApiClient, reference: Trace, test: Trace) -> list[str]:
    """Lines for the report (empty: the record shows no difference in writes)."""
    lines: list[str] = []
    for crash in test.crashes():
        lines.append(f"fault: {describe(crash)}")
    for entry in test.entries:
        if entry.get("op") == "read" and entry.get("stale"):
            lines.append(f"fault: its first stale read: {describe(entry)}")
            break
    missed = test.events(fates=("missed",))
    if missed:
        lines.append(f"fault: {len(missed)} event{'s' if len(missed) != 1 else ''} "
                     f"missed, first: {describe(missed[0])}")
    extra, lacking = write_delta(reference, test)
    write = _first(extra)
    if write is not None:
        decision = test.decision_before(write.seq)
        count = sum(1 for w in test.writes() if w.key == write.key)
        before = sum(1 for w in reference.writes() if w.key == write.key)
        lines.append(f"decision: {write.text()} — the reference run made this write "
                     f"{before} time{'s' if before != 1 else ''}, this run {count}")
        if decision is not None:
            lines.append(f"  made after: {describe(decision)}")
            unseen = await _unseen(api, decision)
            if unseen:
                lines.append(unseen)
    gone = _first(lacking)
    if gone is not None:
        lines.append(f"decision not made: {gone.key.text()} (in the reference run, at "
                     f"revision {gone.revision})")
        decided_on = reference.decision_before(gone.seq)
        if decided_on is not None:
            lines.append(f"  the reference run made it after: {describe(decided_on)}")
            if decided_on.get("op") == "event":
                here = test.matching_event(decided_on)
                lines.append("  in this run that event was "
                             + (str(here.get("fate", "delivered")) if here is not None
                                else "never recorded (no watch delivered it)"))
    return lines
