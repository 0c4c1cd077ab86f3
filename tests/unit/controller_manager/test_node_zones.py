"""SPEC PS2, Kubernetes 1.32's zone disruption and TaintNodesByCondition: zone states
(`ComputeZoneState`), tainting rates per state, the rate-limited tainting queue (burst 1)
driven by a fake clock, master disruption when every zone is fully disrupted, and the
NoSchedule taints of node conditions and `spec.unschedulable`."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node
from skiff.clock import FakeClock
from skiff.controller_manager.nodelifecycle.health import desired_no_schedule_taints
from skiff.controller_manager.nodelifecycle.zones import (
    EvictionRates,
    ZoneState,
    ZoneTainter,
    compute_zone_state,
    handle_disruption,
    tainting_rate,
    zone_key,
)
from skiff.controller_manager.settings import parse_settings

NORMAL, PARTIAL, FULL = (ZoneState.NORMAL, ZoneState.PARTIAL_DISRUPTION,
                         ZoneState.FULL_DISRUPTION)
RATES = EvictionRates()


@pytest.mark.parametrize(("ready", "expected"), [
    pytest.param(["True", "True"], (0, NORMAL), id="all-ready"),
    pytest.param(["Unknown"], (1, FULL), id="single-node-down"),
    pytest.param(["Unknown", "False", None], (3, FULL), id="none-ready"),
    pytest.param(["True", "Unknown", "Unknown"], (2, NORMAL), id="two-down-is-never-partial"),
    pytest.param(["True", "Unknown", "Unknown", "Unknown"], (3, PARTIAL), id="75pct"),
    pytest.param(["True", "True", "True", "True", "Unknown", "Unknown", "Unknown"],
                 (3, NORMAL), id="43pct-below-threshold"),
    pytest.param(["True"] * 9 + ["Unknown"] * 11, (11, PARTIAL), id="55pct-at-threshold"),
    pytest.param([], (0, NORMAL), id="empty"),
])
def test_ps2_compute_zone_state(ready: list[str | None], expected: tuple[int, ZoneState]
                                ) -> None:
    assert compute_zone_state(ready, unhealthy_zone_threshold=0.55) == expected


@pytest.mark.parametrize(("state", "size", "rate"), [
    pytest.param(NORMAL, 3, 0.1, id="normal"),
    pytest.param(FULL, 3, 0.1, id="full-one-zone-evicts-at-normal-rate"),
    pytest.param(PARTIAL, 50, 0.0, id="partial-small-zone-stops"),
    pytest.param(PARTIAL, 51, 0.01, id="partial-large-zone-secondary-rate"),
])
def test_ps2_tainting_rate_per_zone_state(state: ZoneState, size: int, rate: float) -> None:
    assert tainting_rate(state, size, RATES) == rate


def test_ps2_zone_key_from_topology_labels() -> None:
    node = make_node("n1").label("topology.kubernetes.io/zone", "a").obj()
    assert zone_key(node) == ":\x00:a"
    beta = make_node("n2").label("failure-domain.beta.kubernetes.io/region", "r").obj()
    assert zone_key(beta) == "r:\x00:"
    assert zone_key(make_node("n3").obj()) == ""


def test_ps2_tainting_queue_lets_one_node_through_per_token() -> None:
    clock = FakeClock()
    tainter = ZoneTainter(0.1, now=clock.monotonic())
    for name in ("a", "b", "c"):
        tainter.add(name)
    assert tainter.due(clock.monotonic()) == ["a"]  # burst 1: the first at once
    clock.advance(9.9)
    assert tainter.due(clock.monotonic()) == []
    clock.advance(0.1)
    assert tainter.due(clock.monotonic()) == ["b"]
    tainter.swap_rate(0.0, now=clock.monotonic())  # master disruption: nothing at all
    clock.advance(1000)
    assert tainter.due(clock.monotonic()) == []
    tainter.swap_rate(0.1, now=clock.monotonic())  # back: the new bucket starts empty
    assert tainter.due(clock.monotonic()) == []
    clock.advance(10)
    assert tainter.due(clock.monotonic()) == ["c"]


def test_ps2_removed_node_leaves_the_tainting_queue() -> None:
    tainter = ZoneTainter(0.1, now=0)
    tainter.add("a")
    assert tainter.remove("a")
    assert not tainter.remove("a")
    assert tainter.due(0) == []


def test_ps2_every_zone_fully_disrupted_stops_all_tainting() -> None:
    zones: dict[str, list[str | None]] = {"a": ["Unknown", "Unknown"], "b": ["Unknown"]}
    first = handle_disruption({"a": NORMAL, "b": NORMAL}, zones, rates=RATES)
    assert first.entering and first.all_disrupted and not first.leaving
    assert first.rates == {"a": 0.0, "b": 0.0}
    again = handle_disruption(first.states, zones, rates=RATES)
    assert again.all_disrupted and not again.entering
    healed = handle_disruption(again.states, {"a": ["True", "Unknown"], "b": ["Unknown"]},
                               rates=RATES)
    assert healed.leaving and not healed.all_disrupted
    assert healed.states == {"a": NORMAL, "b": FULL}
    assert healed.rates == {"a": 0.1, "b": 0.1}  # one zone down, others up: evict


def test_ps2_one_zone_partially_disrupted_stops_tainting_there_only() -> None:
    zones: dict[str, list[str | None]] = {
        "a": ["True", "Unknown", "Unknown", "Unknown"], "b": ["True", "Unknown"]}
    decision = handle_disruption({}, zones, rates=RATES)
    assert decision.states == {"a": PARTIAL, "b": NORMAL}
    assert decision.rates == {"a": 0.0, "b": 0.1}
    assert not decision.all_disrupted


def test_ps2_eviction_rates_are_kube_controller_manager_flags() -> None:
    s = parse_settings([])
    assert (s.node_eviction_rate, s.secondary_node_eviction_rate,
            s.large_cluster_size_threshold, s.unhealthy_zone_threshold) == (0.1, 0.01, 50, 0.55)
    s = parse_settings(["--node-eviction-rate", "2", "--unhealthy-zone-threshold", "0.7"])
    assert (s.node_eviction_rate, s.unhealthy_zone_threshold) == (2.0, 0.7)


PRESSURE = [("MemoryPressure", "node.kubernetes.io/memory-pressure"),
            ("DiskPressure", "node.kubernetes.io/disk-pressure"),
            ("PIDPressure", "node.kubernetes.io/pid-pressure"),
            ("NetworkUnavailable", "node.kubernetes.io/network-unavailable")]


@pytest.mark.parametrize(("condition", "key"), [pytest.param(c, k, id=c) for c, k in PRESSURE])
def test_ps2_condition_true_taints_node_no_schedule(condition: str, key: str) -> None:
    node = make_node("n1").condition("Ready", "True").condition(condition, "True").obj()
    assert [(t["key"], t["effect"]) for t in desired_no_schedule_taints(node, now=0)] == [
        (key, "NoSchedule")]
    healed = make_node("n1").condition("Ready", "True").condition(condition, "False") \
        .taint(key, "NoSchedule").taint("dedicated", "NoSchedule").obj()
    assert [t["key"] for t in desired_no_schedule_taints(healed, now=0)] == ["dedicated"]


def test_ps2_unschedulable_node_is_tainted_no_schedule() -> None:
    node = make_node("n1").condition("Ready", "True").unschedulable().obj()
    assert [(t["key"], t["effect"]) for t in desired_no_schedule_taints(node, now=0)] == [
        ("node.kubernetes.io/unschedulable", "NoSchedule")]
    uncordoned = make_node("n1").condition("Ready", "True") \
        .taint("node.kubernetes.io/unschedulable", "NoSchedule").obj()
    assert desired_no_schedule_taints(uncordoned, now=0) == []


def test_ps2_no_schedule_pass_leaves_no_execute_taints_alone() -> None:
    node = make_node("n1").condition("Ready", "Unknown") \
        .taint("node.kubernetes.io/unreachable", "NoExecute").obj()
    taints = desired_no_schedule_taints(node, now=0)
    assert {(t["key"], t["effect"]) for t in taints} == {
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule")}
