"""PodDisruptionBudget arithmetic behind the eviction subresource's 429s (AS8)."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.disruption.budget import compute, live_disruptions


def healthy(n: int) -> list[Obj]:
    return [make_pod(f"p{i}").phase("Running").condition("Ready").obj() for i in range(n)]


def unready(n: int) -> list[Obj]:
    return [make_pod(f"u{i}").phase("Running").condition("Ready", "False").obj()
            for i in range(n)]


@pytest.mark.parametrize(("spec", "pods", "scale", "expected"), [
    pytest.param({"minAvailable": 2}, healthy(3), None, (3, 2, 3, 1), id="min-int"),
    pytest.param({"minAvailable": 3}, healthy(3), None, (3, 3, 3, 0), id="min-int-exact"),
    pytest.param({"minAvailable": 2}, healthy(1) + unready(2), None, (3, 2, 1, 0),
                 id="unready-not-healthy"),
    pytest.param({"minAvailable": "50%"}, healthy(5), 5, (5, 3, 5, 2), id="min-pct-ceil"),
    pytest.param({"maxUnavailable": 1}, healthy(3), 3, (3, 2, 3, 1), id="max-int"),
    pytest.param({"maxUnavailable": "30%"}, healthy(4), 4, (4, 2, 4, 2), id="max-pct-ceil"),
    pytest.param({"maxUnavailable": 1}, healthy(2), 3, (3, 2, 2, 0), id="missing-pod"),
    pytest.param({"maxUnavailable": 5}, healthy(2), 2, (2, 0, 2, 2), id="max-above-scale"),
    pytest.param({"maxUnavailable": 1}, healthy(3), None, (0, 0, 3, 0),
                 id="scale-unknown-fail-safe"),
    pytest.param({"maxUnavailable": 1}, healthy(3), 0, (0, 0, 3, 0),
                 id="expected-zero-allows-zero"),
    pytest.param({"minAvailable": "50%"}, healthy(2), 0, (0, 0, 2, 0),
                 id="expected-zero-pct-allows-zero"),
    pytest.param({"minAvailable": 0}, [], None, (0, 0, 0, 0), id="no-pods"),
])
def test_pdb_status(spec: Obj, pods: list[Obj], scale: int | None,
                    expected: tuple[int, int, int, int]) -> None:
    status = compute(spec, pods, {}, controller_scale=scale)
    assert (status.expected_pods, status.desired_healthy, status.current_healthy,
            status.disruptions_allowed) == expected


def test_pdb_recent_eviction_is_not_healthy_until_it_expires() -> None:
    clock = FakeClock()
    pods = healthy(3)
    disrupted = {"p0": rfc3339(clock.now()), "gone": rfc3339(clock.now())}
    live, expires_in = live_disruptions(disrupted, pods, now=clock.now(), timeout=120)
    assert live == {"p0": disrupted["p0"]} and expires_in == 120
    assert compute({"minAvailable": 2}, pods, live,
                   controller_scale=None).disruptions_allowed == 0
    clock.advance(121)
    live, expires_in = live_disruptions(disrupted, pods, now=clock.now(), timeout=120)
    assert live == {} and expires_in is None


def test_pdb_eviction_entry_dropped_once_the_pod_terminates() -> None:
    pods = [make_pod("p0").phase("Running").condition("Ready").terminating().obj()]
    live, _ = live_disruptions({"p0": rfc3339(0)}, pods, now=10, timeout=120)
    assert live == {}
