"""LC3: the kubelet's restart backoff (first restart immediate, then base doubling to the
cap, reset after 2 × cap of clean running), with a fake clock."""

from __future__ import annotations

import pytest

from skiff.client.backoff import Backoff
from skiff.clock import FakeClock

KEY = ("uid", "c")


def _waits(backoff: Backoff[tuple[str, str]], clock: FakeClock, crashes: int,
           runs_for: float) -> list[float]:
    """Replay the pod worker's decision at each crash: the delay before the restart."""
    waits = []
    for _ in range(crashes):
        finished = clock.now()
        wait = backoff.get(KEY) if backoff.in_backoff_since(KEY, finished) else 0.0
        waits.append(wait)
        clock.advance(wait)
        backoff.next(KEY)
        clock.advance(runs_for)
    return waits


@pytest.mark.parametrize(("base", "cap", "crashes", "expected"), [
    pytest.param(10, 300, 8, [0, 10, 20, 40, 80, 160, 300, 300], id="kubernetes-defaults"),
    pytest.param(0.5, 2, 6, [0, 0.5, 1, 2, 2, 2], id="compressed-as-in-the-tests"),
])
def test_lc3_restart_delays(base: float, cap: float, crashes: int,
                            expected: list[float]) -> None:
    clock = FakeClock()
    backoff: Backoff[tuple[str, str]] = Backoff(initial=base, maximum=cap, clock=clock)
    assert _waits(backoff, clock, crashes, runs_for=0.1) == expected


@pytest.mark.parametrize(("ran_for", "expected_next_wait"), [
    pytest.param(599.0, 40.0, id="crash-within-600s-keeps-backing-off"),
    pytest.param(601.0, 0.0, id="600s-of-clean-running-resets"),
])
def test_lc3_backoff_resets_after_600s(ran_for: float, expected_next_wait: float) -> None:
    clock = FakeClock()
    backoff: Backoff[tuple[str, str]] = Backoff(initial=10, maximum=300, clock=clock)
    _waits(backoff, clock, 3, runs_for=1)  # waits 0, 10, 20; now at delay 40
    clock.advance(ran_for)
    assert _waits(backoff, clock, 1, runs_for=1) == [expected_next_wait]
