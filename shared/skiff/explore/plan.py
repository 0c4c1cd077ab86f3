"""The test plan: from the reference run's trace, one perturbation at each point where the
controller's decision depended on a state, as Sieve derives its plans (OSDI '22) — but
expressed so that a fresh cluster, whose revision numbers differ, meets the same point:

- *stale view from write #k*: the controller's cached reads and watches stop at the
  revision before its own k-th write (Kubernetes issue 59848: the cache does not show
  what it just wrote), for each write with a cached read or a watch event since the
  write before it (even when a consistent read came between: it may still have acted on
  the cached state);
- *stale view before step j*: its view pinned just before a workload step the controller
  reacted to, so that step's change arrives late;
- *missed event*: each watch event it acted on (a write followed before the next event),
  dropped;
- *crash after write*: killed right after each distinct write commits, and restarted.

Counting starts where the workload's steps begin, in the reference run and in each test.
Points that are the same fault (same write key, same event) are tested once; the plan is
capped at `max_tests`, taking the kinds in turn so a cap keeps every kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from skiff.api.types import Obj
from skiff.explore.record import Trace, describe, is_cached_read

__all__ = ["KINDS", "Trial", "make_plan"]

KINDS = ("stale-view", "missed-event", "crash")
# Writes that record what happened rather than decide anything (Events, Leases): counted,
# never a test point of their own.
NOISE = frozenset({"events", "events.events.k8s.io", "leases.coordination.k8s.io"})


@dataclass(frozen=True)
class Trial:
    """One test run: a perturbation of the controller's identity (its `spec` without the
    subject; a crash's target is filled in at run time) from the start of the steps, or —
    `before_step` — a view pinned right before that step."""

    id: str
    kind: str  # one of KINDS
    title: str  # "stale view from its write #1 (create configmaps demo/db-*)"
    point: str  # the reference run's decision this perturbs, one line
    spec: Obj = field(default_factory=dict)
    before_step: int = -1

    def to_json(self) -> Obj:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Obj) -> Trial:
        return cls(**{k: data[k] for k in ("id", "kind", "title", "point", "spec",
                                            "before_step") if k in data})


def _event_name(entry: Obj, trace: Trace) -> str:
    """The name a missedEvents rule matches (`namespace/name`), or "" when the object's
    name was generated (it will differ in the test run)."""
    resource, ns = str(entry.get("resource")), str(entry.get("namespace") or "")
    name = str(entry.get("name") or "")
    if trace.masked_name(resource, ns, name) != name:
        return ""
    return f"{ns}/{name}" if ns else name


def _cached_since(trace: Trace, after: int, before: int) -> Obj | None:
    """The last cached read or delivered watch event between two seqs: the state, as a
    cache showed it, that a write at `before` may have been decided on."""
    found = None
    for e in trace.entries:
        seq = int(e["seq"])
        if after < seq < before and (is_cached_read(e) or (
                e.get("op") == "event" and e.get("fate", "delivered") == "delivered")):
            found = e
    return found


def _stale_from_writes(trace: Trace) -> list[Trial]:
    tests, seen = [], set()
    previous = trace.start_seq
    for k, write in enumerate(trace.writes(), start=1):
        if write.key.resource in NOISE:
            continue
        decision = _cached_since(trace, previous, write.seq)
        previous = write.seq
        if decision is None:
            continue
        if write.key in seen:
            continue
        seen.add(write.key)
        tests.append(Trial(
            id="", kind="stale-view",
            title=f"stale view from its write #{k} ({write.key.text()})",
            point=f"{describe(decision)} → {write.key.text()}",
            spec={"staleView": {"fromWrite": k}}))
    return tests


def _stale_before_steps(trace: Trace, step_times: Sequence[tuple[int, str, float]]
                        ) -> list[Trial]:
    """A mutating step after which (before the next step) the controller wrote."""
    tests = []
    writes = trace.writes()
    for i, (index, text, began) in enumerate(step_times):
        ends = step_times[i + 1][2] if i + 1 < len(step_times) else float("inf")
        reacted = [w for w in writes if began <= w.time < ends]
        if not reacted:
            continue
        tests.append(Trial(
            id="", kind="stale-view",
            title=f"stale view pinned before step {index} ({text})",
            point=f"step {index} ({text}) → {reacted[0].key.text()}",
            before_step=index))
    return tests


def _missed(trace: Trace) -> list[Trial]:
    tests, seen = [], set()
    writes = trace.writes()
    entries = trace.entries
    for event in trace.events():
        seq = int(event["seq"])
        # a decision: a write after this event (reads between are its reconcile), before
        # the next event delivered
        nxt = next((e for e in entries if int(e["seq"]) > seq and e.get("op") == "event"
                    and e.get("fate", "delivered") == "delivered"), None)
        acted = [w for w in writes if w.seq > seq and (nxt is None or w.seq < int(nxt["seq"]))]
        acted = [w for w in acted if w.key.resource not in NOISE]
        if not acted or event.get("resource") in NOISE:
            continue
        name = _event_name(event, trace)
        key = (event.get("resource"), event.get("type"), name)
        if key in seen:
            continue
        seen.add(key)
        spec: Obj = {"resources": [event["resource"]], "types": [event["type"]]}
        if name:
            spec["names"] = [name]
        target = acted[0].key.text()
        tests.append(Trial(
            id="", kind="missed-event",
            title=f"missed {event['type']} of {event['resource']} "
                  f"{name or '(any object)'}",
            point=f"{describe(event)} → {target}",
            spec={"missedEvents": spec}))
    return tests


def _crashes(trace: Trace) -> list[Trial]:
    tests, seen = [], set()
    nth: dict[tuple[str, str], int] = {}
    for write in trace.writes():
        match = (write.key.resource, write.key.verb)
        nth[match] = nth.get(match, 0) + 1
        if write.key in seen or write.key.resource in NOISE:
            continue
        seen.add(write.key)
        crash: Obj = {"after": nth[match], "resources": [write.key.resource],
                      "verbs": [write.key.verb]}
        tests.append(Trial(
            id="", kind="crash",
            title=f"crash after {write.key.text()} (its #{nth[match]} "
                  f"{write.key.verb} of {write.key.resource})",
            point=write.key.text(),
            spec={"crashOnWrite": crash}))
    return tests


def make_plan(trace: Trace, *, step_times: Sequence[tuple[int, str, float]] = (),
              kinds: Sequence[str] = KINDS, max_tests: int = 20) -> list[Trial]:
    """The plan for `trace` (a reference run from its steps' start); `step_times`: each
    mutating step's (index, description, start time) in that run."""
    groups: list[list[Trial]] = []
    if "stale-view" in kinds:
        groups.append(_dedup(_stale_from_writes(trace) + _stale_before_steps(trace,
                                                                              step_times)))
    if "missed-event" in kinds:
        groups.append(_missed(trace))
    if "crash" in kinds:
        groups.append(_crashes(trace))
    chosen: list[Trial] = []
    while len(chosen) < max_tests and any(groups):
        for group in groups:
            if group and len(chosen) < max_tests:
                chosen.append(group.pop(0))
    order = {kind: i for i, kind in enumerate(KINDS)}
    chosen.sort(key=lambda t: order[t.kind])  # stable: each kind in its derived order
    return [Trial(**{**t.to_json(), "id": f"t{i:02d}"}) for i, t in enumerate(chosen, 1)]


def _dedup(tests: list[Trial]) -> list[Trial]:
    seen: set[str] = set()
    out = []
    for t in tests:
        key = json.dumps([t.spec, t.before_step], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out
