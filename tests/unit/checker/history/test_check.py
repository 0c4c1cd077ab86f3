"""The history checker, fed histories with one anomaly each: each is caught, by kind, and a
consistent history (with stale cached reads, which Kubernetes allows) reports none."""

from __future__ import annotations

from skiff.checker.history import History, Observation, Op, WatchRecord, check
from skiff.checker.history.model import CACHED_READ, FAIL, OK, READ, UNKNOWN, WRITE


def w(p: int, value: str, prev: int, rv: int | None, t0: float, t1: float,
      outcome: str = OK, key: str = "a") -> Op:
    return Op(p, WRITE, key, t0, t1, outcome, value=value, rv=rv, prev_rv=prev)


def r(p: int, value: str, rv: int, t0: float, t1: float, kind: str = READ,
      key: str = "a") -> Op:
    return Op(p, kind, key, t0, t1, OK, value=value, rv=rv)


def ev(watcher: int, rv: int, value: str, key: str = "a", type_: str = "MODIFIED") -> WatchRecord:
    return WatchRecord(watcher, type_, key, rv, value, float(rv))


def start(watcher: int, rv: int) -> WatchRecord:
    return WatchRecord(watcher, "RESTART", "", rv, None, 0.0)


def consistent() -> History:
    """Key a: init@10 → x1@11 → x2@13 (x3 conflicted, x4 unknown and not applied); key b
    written at 12. One watcher saw everything from rv 10; cached reads lag."""
    return History(
        ops=[r(1, "init", 10, 0.0, 0.1), w(1, "x1", 10, 11, 0.2, 0.3),
             w(2, "b1", 5, 12, 0.35, 0.4, key="b"),
             r(2, "x1", 11, 0.4, 0.5), w(2, "x2", 11, 13, 0.6, 0.7),
             w(1, "x3", 11, None, 0.6, 0.75, FAIL), w(3, "x4", 13, None, 0.8, 1.8, UNKNOWN),
             r(3, "init", 10, 1.0, 1.1, CACHED_READ), r(3, "x2", 13, 1.2, 1.3)],
        watch=[start(1, 10), ev(1, 11, "x1"), ev(1, 12, "b1", key="b"), ev(1, 13, "x2"),
               WatchRecord(1, "BOOKMARK", "", 13, None, 2.0)],
        final=[Observation("a", 13, "x2"), Observation("b", 12, "b1")])


def test_ct3_a_consistent_history_has_no_anomaly_and_cached_staleness_is_allowed() -> None:
    report = check(consistent())
    assert report.forbidden == 0
    assert report.counts() == {"stale-cached-read": 1}
    assert "0 forbidden anomalies" in report.format()
    assert "stale-cached-read (allowed)" in report.format()


def test_ct3_a_lost_acknowledged_write_is_caught() -> None:
    h = consistent()
    # x5 acknowledged at rv 14, yet the final list and every later read show x2@13.
    h.ops += [w(4, "x5", 13, 14, 2.0, 2.1), r(4, "x2", 13, 2.5, 2.6, CACHED_READ)]
    report = check(h)
    assert [(a.kind, a.key) for a in report.of("lost-write")] == [("lost-write", "a")]
    assert "'x5'" in report.of("lost-write")[0].message
    assert report.forbidden >= 1


def test_ct3_a_write_overwritten_by_a_later_write_of_its_chain_is_not_lost() -> None:
    h = consistent()
    # x5@14 is never read itself, but x6 replaced exactly it and x6 is the final state.
    h.ops += [w(4, "x5", 13, 14, 2.0, 2.1), w(4, "x6", 14, 15, 2.2, 2.3)]
    h.final[0] = Observation("a", 15, "x6")
    assert check(h).forbidden == 0


def test_ct3_a_stale_consistent_read_is_caught_in_real_time_order() -> None:
    h = consistent()
    h.ops.append(r(5, "x1", 11, 0.9, 1.0))  # x2@13 was acknowledged at 0.7
    report = check(h)
    stale = report.of("stale-read")
    assert len(stale) == 1 and "rv=11" in stale[0].message and "rv=13" in stale[0].message
    assert any("p5 read" in line for line in stale[0].involved)


def test_ct3_a_read_concurrent_with_the_write_may_return_either_version() -> None:
    h = consistent()
    h.ops.append(r(5, "x1", 11, 0.65, 0.9))  # invoked before x2 was acknowledged
    assert check(h).forbidden == 0


def test_ct3_a_consistent_read_going_back_in_time_is_a_real_time_order_violation() -> None:
    h = consistent()
    # x4 (unknown outcome) did apply: p3 saw it; p6, invoked after, reads x2 again.
    h.ops += [r(3, "x4", 14, 1.9, 2.0), r(6, "x2", 13, 2.1, 2.2)]
    h.final[0] = Observation("a", 14, "x4")
    report = check(h)
    assert report.counts().get("real-time-order") == 1
    assert report.counts().get("lost-write") is None


def test_ct3_two_values_for_one_version_are_caught() -> None:
    h = consistent()
    h.ops.append(r(5, "other", 13, 1.5, 1.6))
    assert check(h).counts().get("wrong-value") == 1


def test_ct3_a_watch_gap_is_caught() -> None:
    h = consistent()
    h.watch.extend([start(2, 10), ev(2, 11, "x1"), ev(2, 13, "x2")])  # skipped b@12
    report = check(h)
    gaps = report.of("watch-gap")
    assert [(g.key, "rv=12" in g.message) for g in gaps] == [("b", True)]
    assert any("w2" in line for line in gaps[0].involved)


def test_ct3_a_relist_after_gone_starts_the_coverage_again() -> None:
    h = consistent()
    h.watch.extend([start(2, 10), ev(2, 11, "x1"), start(2, 12), ev(2, 13, "x2")])
    assert check(h).forbidden == 0


def test_ct3_a_watch_duplicate_is_caught() -> None:
    h = consistent()
    h.watch.extend([start(2, 10), ev(2, 11, "x1"), ev(2, 12, "b1", key="b"),
                    ev(2, 12, "b1", key="b"), ev(2, 13, "x2")])
    report = check(h)
    assert report.counts() == {"watch-duplicate": 1, "stale-cached-read": 1}


def test_ct3_a_watch_reordering_is_caught() -> None:
    h = consistent()
    h.watch.extend([start(2, 10), ev(2, 12, "b1", key="b"), ev(2, 11, "x1"),
                    ev(2, 13, "x2")])
    report = check(h)
    assert report.counts().get("watch-reorder") == 1
    assert "rv=11 delivered after rv=12" in report.of("watch-reorder")[0].message


def test_ct3_a_watch_going_past_the_final_state_without_events_hides_nothing() -> None:
    h = consistent()
    h.watch.extend([start(2, 13), WatchRecord(2, "BOOKMARK", "", 20, None, 3.0)])
    assert check(h).forbidden == 0


def test_ct3_the_history_round_trips_through_json() -> None:
    h = consistent()
    assert History.from_json(h.to_json()) == h


def test_ct3_examples_name_the_operations_with_their_wall_clock_times() -> None:
    h = consistent()
    h.ops.append(r(5, "x1", 11, 3600.25, 3600.5))
    stale = check(h).of("stale-read")[0]
    assert stale.involved[0] == "p5 read -> rv=11 'x1' ok [01:00:00.250 .. 01:00:00.500]"
