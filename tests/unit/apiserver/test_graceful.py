"""SPEC GT1–GT3 as pure functions: the period a DELETE gets and what it does."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import make_pod
from skiff.apiserver.registry.graceful import (
    Action,
    decide,
    finished_finalizing,
    later_delete_period,
    pod_grace_period,
)
from skiff.clock import parse_rfc3339, rfc3339

NOW = 1_700_000_000.0


@pytest.mark.parametrize(("pod", "requested", "expected"), [
    pytest.param(make_pod().node("n1").obj(), None, 30, id="default-30"),
    pytest.param(make_pod().node("n1").termination_grace_period(45).obj(), None, 45,
                 id="spec-period"),
    pytest.param(make_pod().node("n1").termination_grace_period(45).obj(), 5, 5,
                 id="request-overrides-spec"),
    pytest.param(make_pod().termination_grace_period(45).obj(), None, 0,
                 id="unscheduled-is-0"),
    pytest.param(make_pod().node("n1").phase("Succeeded").obj(), 10, 0, id="succeeded-is-0"),
    pytest.param(make_pod().node("n1").phase("Failed").obj(), None, 0, id="failed-is-0"),
    pytest.param(make_pod().node("n1").obj(), -3, 1, id="negative-is-1"),
    pytest.param(make_pod().node("n1").obj(), 0, 0, id="zero-is-force"),
])
def test_gt1_pod_grace_period(pod: dict[str, Any], requested: int | None,
                              expected: int) -> None:
    assert pod_grace_period(pod, requested) == expected


def _terminating(period: int, deadline: float) -> dict[str, Any]:
    pod = make_pod().node("n1").obj()
    pod["metadata"]["deletionTimestamp"] = rfc3339(deadline)
    pod["metadata"]["deletionGracePeriodSeconds"] = period
    return pod


def test_gt2_first_graceful_delete_marks_with_deadline_and_period() -> None:
    decision = decide(make_pod().node("n1").obj(), 30, NOW)
    assert decision.action is Action.MARK
    meta = decision.obj["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30
    assert parse_rfc3339(meta["deletionTimestamp"]) == NOW + 30


@pytest.mark.parametrize("period", [30, 60])
def test_gt2_a_later_delete_never_lengthens(period: int) -> None:
    pod = _terminating(30, NOW + 30)
    assert decide(pod, period, NOW + 1).action is Action.UNCHANGED


def test_gt2_a_later_shorter_delete_counts_from_the_original_start() -> None:
    """Kubernetes' BeforeDelete: new deletionTimestamp = original start + new period,
    where the original start is the old deletionTimestamp minus the old period."""
    decision = decide(_terminating(30, NOW + 30), 5, NOW + 1)  # deleted at NOW
    assert decision.action is Action.MARK
    assert decision.obj["metadata"]["deletionGracePeriodSeconds"] == 5
    assert parse_rfc3339(decision.obj["metadata"]["deletionTimestamp"]) == NOW + 5


def test_gt2_shortening_moves_the_deadline_earlier_even_into_the_past() -> None:
    decision = decide(_terminating(30, NOW + 2), 10, NOW)  # deleted 28 s ago
    assert decision.obj["metadata"]["deletionGracePeriodSeconds"] == 10
    assert parse_rfc3339(decision.obj["metadata"]["deletionTimestamp"]) == NOW - 18


@pytest.mark.parametrize("spec_period", [5, 30, 60])
def test_gt2_a_later_delete_without_grace_period_is_a_no_op(spec_period: int) -> None:
    """No gracePeriodSeconds on a terminating pod: the pending deletion stands, whatever
    the spec's terminationGracePeriodSeconds says (even when shorter)."""
    pod = _terminating(30, NOW + 30)
    pod["spec"]["terminationGracePeriodSeconds"] = spec_period
    decision = decide(pod, later_delete_period(None), NOW + 1)
    assert decision.action is Action.UNCHANGED
    assert decision.obj == pod


def test_gt2_a_terminating_object_with_no_period_left_is_removed_on_the_next_delete() -> None:
    """A deletion marked with period 0 whose removal did not happen is finished by the next
    DELETE (Kubernetes recovers the same way); finalizers still hold it."""
    assert decide(_terminating(0, NOW), None, NOW + 1).action is Action.DELETE_NOW
    held = _terminating(0, NOW)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    assert decide(held, 5, NOW + 1).action is Action.UNCHANGED


@pytest.mark.parametrize("pod", [
    pytest.param(make_pod().node("n1").obj(), id="running"),
    pytest.param(_terminating(30, NOW + 30), id="already-terminating"),
])
def test_gt3_period_zero_deletes_now(pod: dict[str, Any]) -> None:
    assert decide(pod, 0, NOW).action is Action.DELETE_NOW


def test_gt3_finalizers_keep_a_force_deleted_object_until_removed() -> None:
    pod = make_pod().node("n1").finalizer("example.com/hold").obj()
    decision = decide(pod, 0, NOW)
    assert decision.action is Action.MARK
    assert decision.obj["metadata"]["deletionGracePeriodSeconds"] == 0
    released = decision.obj
    released["metadata"]["finalizers"] = []
    assert finished_finalizing(released)


def test_stored_huge_grace_is_capped_so_the_pod_stays_deletable() -> None:
    pod = make_pod().node("n1").termination_grace_period(1_000_000_000_000).obj()
    period = pod_grace_period(pod, None)
    assert period == (2**63 - 1) // 10**9
    marked = decide(pod, period, NOW).obj["metadata"]
    assert parse_rfc3339(marked["deletionTimestamp"]) == NOW + period
