"""SPEC PS2: node health from Lease renewals, Unknown conditions and lifecycle taints."""

from __future__ import annotations

import pytest

from skiff.api import get_condition
from skiff.api.testing import make_node
from skiff.api.types import Obj
from skiff.clock import FakeClock
from skiff.controller_manager.nodelifecycle.health import (
    desired_no_schedule_taints,
    is_stale,
    mark_unknown,
    no_execute_key,
    observe,
    with_no_execute,
)

GRACE, STARTUP = 50.0, 60.0


def lease(renew: str) -> Obj:
    return {"spec": {"renewTime": renew}}


def test_ps2_node_goes_stale_after_the_grace_period_without_renewals() -> None:
    clock = FakeClock()
    node = make_node("n1").condition("Ready", "True").obj()
    health = observe(None, node=node, lease=lease("t0"), now=clock.monotonic())
    for i in range(1, 6):  # renewals every 10 s keep it fresh
        clock.advance(10)
        health = observe(health, node=node, lease=lease(f"t{i}"), now=clock.monotonic())
        assert not is_stale(health, now=clock.monotonic(), grace_period=GRACE,
                            startup_grace_period=STARTUP)
    clock.advance(GRACE)  # the kubelet stops: same renewTime keeps being observed
    health = observe(health, node=node, lease=lease("t5"), now=clock.monotonic())
    assert not is_stale(health, now=clock.monotonic(), grace_period=GRACE,
                        startup_grace_period=STARTUP)
    clock.advance(1)
    health = observe(health, node=node, lease=lease("t5"), now=clock.monotonic())
    assert is_stale(health, now=clock.monotonic(), grace_period=GRACE,
                    startup_grace_period=STARTUP)
    clock.advance(1)  # a renewal makes it fresh again
    health = observe(health, node=node, lease=lease("t6"), now=clock.monotonic())
    assert not is_stale(health, now=clock.monotonic(), grace_period=GRACE,
                        startup_grace_period=STARTUP)


def test_ps2_node_that_never_reported_gets_the_startup_grace() -> None:
    health = observe(None, node=make_node("n1").obj(), lease=None, now=0)
    assert not is_stale(health, now=55, grace_period=GRACE, startup_grace_period=STARTUP)
    assert is_stale(health, now=61, grace_period=GRACE, startup_grace_period=STARTUP)


def test_ps2_mark_unknown_sets_every_condition_and_keeps_the_cache_intact() -> None:
    node = make_node("n1").condition("Ready", "True").condition("MemoryPressure",
                                                                 "False").obj()
    updated = mark_unknown(node, now=FakeClock().now())
    assert updated is not None
    ready = get_condition(updated, "Ready") or {}
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert (get_condition(updated, "MemoryPressure") or {})["status"] == "Unknown"
    assert (get_condition(node, "Ready") or {})["status"] == "True"  # not mutated
    assert mark_unknown(updated, now=0) is None  # already Unknown: nothing to write


def test_ps2_mark_unknown_on_a_node_that_never_reported() -> None:
    updated = mark_unknown(make_node("n1").obj(), now=0)
    assert updated is not None
    assert (get_condition(updated, "Ready") or {})["reason"] == "NodeStatusNeverUpdated"


UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"


def lifecycle_taints(node: Obj) -> list[Obj]:
    """NoSchedule by condition, then the NoExecute taint the Ready status calls for."""
    node = {**node, "spec": {**node.get("spec", {}),
                             "taints": desired_no_schedule_taints(node, now=0)}}
    ready = next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")
    return with_no_execute(node, no_execute_key(ready), now=FakeClock().now())


@pytest.mark.parametrize(("ready", "existing", "expected"), [
    pytest.param("Unknown", [], {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")},
                 id="unknown-unreachable"),
    pytest.param("False", [], {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")},
                 id="false-not-ready"),
    pytest.param("True", [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")], set(),
                 id="healed-lifted"),
    pytest.param("False", [(UNREACHABLE, "NoExecute")],
                 {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")}, id="swapped"),
    pytest.param("True", [("dedicated", "NoSchedule")], {("dedicated", "NoSchedule")},
                 id="others-kept"),
])
def test_ps2_lifecycle_taints_follow_ready(ready: str, existing: list[tuple[str, str]],
                                           expected: set[tuple[str, str]]) -> None:
    builder = make_node("n1").condition("Ready", ready)
    for key, effect in existing:
        builder.taint(key, effect)
    taints = lifecycle_taints(builder.obj())
    assert {(t["key"], t["effect"]) for t in taints} == expected
    for t in taints:
        if t["effect"] == "NoExecute" and t["key"] in (UNREACHABLE, NOT_READY):
            assert t["timeAdded"]


def test_ps2_a_kept_taint_keeps_its_time_added() -> None:
    node = make_node("n1").condition("Ready", "Unknown").obj()
    node["spec"]["taints"] = [{"key": UNREACHABLE, "effect": "NoExecute",
                               "timeAdded": "2024-01-01T00:00:00Z"}]
    taints = lifecycle_taints(node)
    kept = next(t for t in taints if t["effect"] == "NoExecute")
    assert kept["timeAdded"] == "2024-01-01T00:00:00Z"
