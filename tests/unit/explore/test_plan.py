"""The test plan of `skiff explore` (SPEC CT2) from recorded traces: one perturbation at each
point where the controller's decision followed a state, deduplicated and capped, and the
write comparison that names a run's faulty decision."""

from __future__ import annotations

from typing import Any

from skiff.explore.plan import Trial, make_plan
from skiff.explore.record import Trace, WriteKey, describe, write_delta


def _trace(*entries: dict[str, Any], start_seq: int = 0) -> Trace:
    return Trace([{"seq": i, "time": 100.0 + i, **e} for i, e in enumerate(entries, 1)],
                 start_seq=start_seq)


LIST_CM = {"op": "read", "verb": "list", "resource": "configmaps", "namespace": "demo",
           "resourceVersion": "0", "servedRevision": 10, "headRevision": 10, "items": []}
EV_DB = {"op": "event", "resource": "databases.examples.skiff.io", "type": "ADDED",
         "namespace": "demo", "name": "db", "revision": 9, "fate": "delivered"}


def _create(name: str, generate: str = "", revision: int = 11) -> dict[str, Any]:
    return {"op": "write", "verb": "create", "resource": "configmaps", "namespace": "demo",
            "name": name, "generateName": generate, "revision": revision}


def test_ct2_plan_tests_each_kind_at_the_decisions_of_the_reference_run() -> None:
    trace = _trace(EV_DB, LIST_CM, _create("db-abcde", "db-"), _create("db-fghij", "db-", 12))
    plan = make_plan(trace)
    kinds = [t.kind for t in plan]
    assert kinds == ["stale-view", "missed-event", "crash"]
    stale, missed, crash = plan
    # the two creates are one decision: one stale view from the first, one crash after it
    assert stale.spec == {"staleView": {"fromWrite": 1}}
    assert "list configmaps in demo (resourceVersion=0)" in stale.point
    assert missed.spec == {"missedEvents": {"resources": ["databases.examples.skiff.io"],
                                            "types": ["ADDED"], "names": ["demo/db"]}}
    assert crash.spec == {"crashOnWrite": {"after": 1, "resources": ["configmaps"],
                                           "verbs": ["create"]}}
    assert [t.id for t in plan] == ["t01", "t02", "t03"]


def test_ct2_plan_skips_writes_not_decided_on_a_cached_read_or_event_for_stale_views() -> None:
    consistent = {**LIST_CM, "resourceVersion": ""}
    trace = _trace(consistent, _create("db-0"))
    assert [t.kind for t in make_plan(trace)] == ["crash"]


def test_ct2_plan_stales_a_write_after_an_event_even_with_a_consistent_read_between() -> None:
    consistent = {**LIST_CM, "resourceVersion": ""}
    trace = _trace(EV_DB, consistent, _create("db-0"), consistent, _create("db-1", revision=12))
    stale = [t for t in make_plan(trace) if t.kind == "stale-view"]
    assert [t.spec for t in stale] == [{"staleView": {"fromWrite": 1}}]
    assert stale[0].point.startswith("ADDED event of databases.examples.skiff.io demo/db")


def test_ct2_plan_counts_from_where_the_steps_began() -> None:
    startup = _create("lease", revision=5)
    trace = _trace(startup, EV_DB, LIST_CM, _create("db-0"), start_seq=1)
    stale = next(t for t in make_plan(trace) if t.kind == "stale-view")
    assert stale.spec == {"staleView": {"fromWrite": 1}}
    crash = next(t for t in make_plan(trace) if t.kind == "crash")
    assert crash.spec["crashOnWrite"]["after"] == 1


def test_ct2_plan_misses_an_event_only_when_a_write_followed_it() -> None:
    ignored = {**EV_DB, "type": "MODIFIED", "revision": 20}
    trace = _trace(EV_DB, LIST_CM, _create("db-0"), ignored)
    missed = [t for t in make_plan(trace) if t.kind == "missed-event"]
    assert [t.spec["missedEvents"]["types"] for t in missed] == [["ADDED"]]


def test_ct2_plan_does_not_name_an_object_whose_name_was_generated() -> None:
    deleted = {"op": "event", "resource": "configmaps", "type": "DELETED",
               "namespace": "demo", "name": "db-abcde", "revision": 14, "fate": "delivered"}
    trace = _trace(_create("db-abcde", "db-"), deleted, _create("db-zzzzz", "db-", 15))
    missed = next(t for t in make_plan(trace) if t.kind == "missed-event")
    assert missed.spec["missedEvents"] == {"resources": ["configmaps"], "types": ["DELETED"]}


def test_ct2_plan_pins_a_view_before_a_step_the_controller_reacted_to() -> None:
    trace = _trace(EV_DB, LIST_CM, _create("db-0"))
    steps = [(0, "create databases/db", 100.5), (3, "patch databases/db", 200.0)]
    pinned = [t for t in make_plan(trace, step_times=steps) if t.before_step >= 0]
    assert [t.before_step for t in pinned] == [0]  # nothing followed step 3


def test_ct2_plan_cap_keeps_every_kind() -> None:
    entries: list[dict[str, Any]] = []
    for i in range(10):
        entries += [{**EV_DB, "name": f"db{i}"}, LIST_CM, _create(f"cm-{i}")]
    plan = make_plan(_trace(*entries), max_tests=6)
    assert len(plan) == 6
    assert {t.kind for t in plan} == {"stale-view", "missed-event", "crash"}


def test_ct2_plan_round_trips_a_test_for_replay() -> None:
    test = make_plan(_trace(EV_DB, LIST_CM, _create("db-0")))[0]
    assert Trial.from_json(test.to_json()) == test


def test_ct2_write_delta_names_the_extra_and_the_missing_writes() -> None:
    reference = _trace(EV_DB, LIST_CM, _create("db-aaaaa", "db-"),
                       {"op": "write", "verb": "delete", "resource": "configmaps",
                        "namespace": "demo", "name": "lock", "revision": 13})
    test = _trace(EV_DB, LIST_CM, _create("db-bbbbb", "db-"), LIST_CM,
                  _create("db-ccccc", "db-", 14))
    extra, missing = write_delta(reference, test)
    assert [w.key for w in extra] == [WriteKey("create", "configmaps", "demo", "db-*")]
    assert [w.name for w in extra] == ["db-ccccc"]
    assert [w.key.text() for w in missing] == ["delete configmaps demo/lock"]
    assert test.decision_before(extra[0].seq) == test.entries[3]


def test_ct2_record_lines_say_a_read_was_stale_and_an_event_missed() -> None:
    stale = {**LIST_CM, "servedRevision": 8, "headRevision": 12, "stale": True}
    assert describe(stale) == ("list configmaps in demo (resourceVersion=0) served at "
                               "revision 8 while the head was 12 (stale): 0 items")
    assert describe({**EV_DB, "type": "DELETED", "fate": "missed"}) == (
        "DELETED event of databases.examples.skiff.io demo/db (revision 9) missed")


def test_ct2_plan_puts_no_test_at_an_event_or_lease_write() -> None:
    event = {"op": "write", "verb": "create", "resource": "events", "namespace": "demo",
             "name": "db.18ec4906e9542400", "revision": 11}
    trace = _trace(EV_DB, LIST_CM, event, _create("db-0", revision=12))
    plan = make_plan(trace)
    assert all("events" not in t.title for t in plan), [t.title for t in plan]
    stale = next(t for t in plan if t.kind == "stale-view")
    assert stale.spec == {"staleView": {"fromWrite": 2}}  # the event still counts
    crash = next(t for t in plan if t.kind == "crash")
    assert crash.spec["crashOnWrite"] == {"after": 1, "resources": ["configmaps"],
                                          "verbs": ["create"]}


def test_ct2_settled_waits_for_a_crashed_controller_to_come_back() -> None:
    from skiff.explore.driver import settled_since

    wrote = {"op": "write", "verb": "create", "time": 105.0, "revision": 9}
    crash = {"op": "crash", "time": 106.0, "revision": 9}
    assert settled_since([wrote], healed=100.0) == 105.0
    assert settled_since([wrote], healed=110.0) == 110.0
    assert settled_since([wrote, crash], healed=100.0) is None  # not back yet
    back = {"op": "read", "verb": "list", "time": 112.0}
    assert settled_since([wrote, crash, back], healed=100.0) == 112.0
    failed = {"op": "write", "verb": "create", "time": 120.0, "code": 409}
    assert settled_since([wrote, crash, back, failed], healed=100.0) == 112.0
    # a controller that watches is back once it watches again (its initial list is read)
    watched = {"op": "watch", "time": 101.0}
    assert settled_since([watched, wrote, crash, back], healed=100.0) is None
    again = {"op": "watch", "time": 113.0}
    assert settled_since([watched, wrote, crash, back, again], healed=100.0) == 113.0
