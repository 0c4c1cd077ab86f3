"""Per-key exponential backoff (flowcontrol.Backoff) — LC3's CrashLoopBackOff timing."""

from __future__ import annotations

import pytest

from skiff.client.backoff import Backoff
from skiff.clock import FakeClock


def crash_loop_backoff(clock: FakeClock) -> Backoff[str]:
    """The kubelet's container restart backoff: 10 s doubling to 300 s, reset after 600 s."""
    return Backoff(initial=10.0, maximum=300.0, reset_after=600.0, clock=clock)


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        pytest.param(1, [10.0], id="first-restart-waits-10s"),
        pytest.param(3, [10.0, 20.0, 40.0], id="doubles"),
        pytest.param(6, [10.0, 20.0, 40.0, 80.0, 160.0, 300.0], id="caps-at-300s"),
        pytest.param(8, [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0], id="stays-capped"),
    ],
)
def test_lc3_backoff_doubles_and_caps_at_300s(failures: int, expected: list[float]) -> None:
    clock = FakeClock()
    backoff = crash_loop_backoff(clock)
    delays = []
    for _ in range(failures):
        delays.append(backoff.next("pod/c"))
        clock.advance(delays[-1] + 5)  # the container restarts, runs 5 s, crashes again
    assert delays == expected
    assert backoff.get("pod/c") == expected[-1]


@pytest.mark.parametrize(
    ("ran_for", "expected"),
    [
        pytest.param(599.0, 160.0, id="599s-keeps-doubling"),
        pytest.param(600.0, 160.0, id="exactly-600s-keeps-doubling"),
        pytest.param(601.0, 10.0, id="601s-starts-again-at-10s"),
        pytest.param(3600.0, 10.0, id="an-hour-starts-again-at-10s"),
    ],
)
def test_lc3_backoff_resets_after_600s(ran_for: float, expected: float) -> None:
    clock = FakeClock()
    backoff = crash_loop_backoff(clock)
    for _ in range(4):  # 10, 20, 40, 80
        backoff.next("pod/c")
    clock.advance(ran_for)
    assert backoff.next("pod/c") == expected


def test_backoff_reset_after_defaults_to_twice_maximum() -> None:
    clock = FakeClock()
    backoff: Backoff[str] = Backoff(initial=1.0, maximum=8.0, clock=clock)
    assert [backoff.next("k") for _ in range(3)] == [1.0, 2.0, 4.0]
    clock.advance(16.0)
    assert backoff.next("k") == 8.0
    clock.advance(16.5)
    assert backoff.next("k") == 1.0


def test_backoff_keys_are_independent_and_reset_forgets() -> None:
    backoff = crash_loop_backoff(FakeClock())
    backoff.next("a")
    backoff.next("a")
    assert backoff.next("b") == 10.0
    assert backoff.get("a") == 20.0
    backoff.reset("a")
    assert backoff.get("a") == 0.0
    assert backoff.next("a") == 10.0


@pytest.mark.parametrize(
    ("since_finished", "in_backoff"),
    [
        pytest.param(5.0, True, id="inside-the-20s-window"),
        pytest.param(19.9, True, id="just-inside"),
        pytest.param(20.0, False, id="window-over"),
    ],
)
def test_lc3_backoff_in_backoff_since_finished_at(since_finished: float, in_backoff: bool) -> None:
    clock = FakeClock()
    backoff = crash_loop_backoff(clock)
    backoff.next("pod/c")
    backoff.next("pod/c")  # 20 s
    finished_at = clock.now()
    clock.advance(since_finished)
    assert backoff.in_backoff_since("pod/c", finished_at) is in_backoff
    assert backoff.in_backoff_since("other", finished_at) is False


def test_backoff_gc_drops_entries_idle_longer_than_reset_after() -> None:
    clock = FakeClock()
    backoff = crash_loop_backoff(clock)
    backoff.next("old")
    clock.advance(500.0)
    backoff.next("recent")
    clock.advance(200.0)
    backoff.gc(clock.now())
    assert len(backoff) == 1
    assert backoff.get("recent") == 10.0


def test_backoff_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial=10.0, maximum=5.0)
