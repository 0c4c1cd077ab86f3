"""SPEC FN1 (proposed addition): no fence while every zone is fully disrupted (a
control-plane-side partition, as the node lifecycle controller's zone logic reads it), and a
fresh fencing delay once that disruption ends. Pure logic over a fake clock."""

from __future__ import annotations

from skiff.api.testing import make_node
from skiff.api.types import Obj
from skiff.clock import FakeClock
from skiff.controller_manager.fencing.safety import (
    ControlPlaneGuard,
    every_zone_fully_disrupted,
)


def node(name: str, ready: str | None, *, zone: str = "", exclude: bool = False) -> Obj:
    obj = make_node(name).obj()
    obj["status"]["conditions"] = [] if ready is None else [{"type": "Ready",
                                                              "status": ready}]
    labels = obj["metadata"].setdefault("labels", {})
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    if exclude:
        labels["node.kubernetes.io/exclude-disruption"] = ""
    return obj


def test_fn1_every_zone_fully_disrupted_only_when_no_zone_has_a_ready_node() -> None:
    assert every_zone_fully_disrupted([node("a", "Unknown"), node("b", "False")])
    assert every_zone_fully_disrupted([node("a", "Unknown", zone="z1"),
                                       node("b", None, zone="z2")])
    # One Ready node anywhere: the nodes, not the control plane, are cut.
    assert not every_zone_fully_disrupted([node("a", "Unknown", zone="z1"),
                                           node("b", "True", zone="z2")])
    assert not every_zone_fully_disrupted([node("a", "Unknown"), node("b", "True")])
    # Excluded nodes do not count either way; no node at all is no disruption.
    assert not every_zone_fully_disrupted([node("a", "True", exclude=True)])
    assert every_zone_fully_disrupted([node("a", "Unknown"),
                                       node("b", "True", exclude=True)])
    assert not every_zone_fully_disrupted([])


def test_fn1_guard_holds_fencing_during_a_full_disruption_and_a_delay_after_it() -> None:
    clock = FakeClock()
    guard = ControlPlaneGuard(delay=60)
    cut = [node("a", "Unknown", zone="z1"), node("b", "Unknown", zone="z2")]
    why, recheck = guard.hold(cut, clock.now())
    assert why is not None and "every zone is fully disrupted" in why
    assert recheck == 60
    clock.advance(600)  # however long it lasts, nothing is fenced
    assert guard.hold(cut, clock.now())[0] is not None

    healed_one = [node("a", "Unknown", zone="z1"), node("b", "True", zone="z2")]
    why, recheck = guard.hold(healed_one, clock.now())
    assert why is not None and "fresh fencing delay" in why
    assert recheck == 60
    clock.advance(59)
    why, recheck = guard.hold(healed_one, clock.now())
    assert why is not None and recheck is not None and abs(recheck - 1) < 1e-6
    clock.advance(1)
    assert guard.hold(healed_one, clock.now()) == (None, None)


def test_fn1_guard_lets_a_single_partitioned_node_be_fenced_beside_a_ready_one() -> None:
    guard = ControlPlaneGuard(delay=60)
    assert guard.hold([node("a", "Unknown"), node("b", "True")], 0.0) == (None, None)
