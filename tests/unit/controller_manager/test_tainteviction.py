"""SPEC PS2: when a pod's NoExecute tolerations run out (taint eviction timing)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.nodelifecycle import eviction_time

Obj = dict[str, Any]
CLOCK = FakeClock()
NOW = CLOCK.now()
UNREACHABLE = "node.kubernetes.io/unreachable"


def taint(key: str = UNREACHABLE, effect: str = "NoExecute", *, added: float = NOW,
          value: str = "") -> Obj:
    t: Obj = {"key": key, "effect": effect, "timeAdded": rfc3339(added)}
    if value:
        t["value"] = value
    return t


def tol(key: str = UNREACHABLE, *, seconds: int | None = None, operator: str = "Exists",
        effect: str = "NoExecute", value: str = "") -> Obj:
    t: Obj = {"key": key, "operator": operator, "effect": effect}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    if value:
        t["value"] = value
    return t


@pytest.mark.parametrize(("taints", "tolerations", "expected"), [
    pytest.param([], [], None, id="no-taints"),
    pytest.param([taint(effect="NoSchedule")], [], None, id="noschedule-is-not-eviction"),
    pytest.param([taint()], [], NOW, id="untolerated-evicts-now"),
    pytest.param([taint()], [tol(seconds=300)], NOW + 300, id="default-300s"),
    pytest.param([taint(added=NOW - 100)], [tol(seconds=300)], NOW + 200,
                 id="counts-from-time-added"),
    pytest.param([taint(added=NOW - 400)], [tol(seconds=300)], NOW - 100, id="overdue"),
    pytest.param([taint()], [tol()], None, id="no-seconds-tolerates-forever"),
    pytest.param([taint()], [tol(seconds=300), tol(seconds=10)], NOW + 10,
                 id="shortest-matching-wins"),
    pytest.param([taint()], [tol(seconds=-5)], NOW, id="negative-means-now"),
    pytest.param([taint(), taint("other")], [tol(seconds=60)], NOW, id="one-untolerated"),
    pytest.param([taint(), taint("other", added=NOW - 50)],
                 [tol(seconds=60), tol("other", seconds=60)], NOW + 10,
                 id="earliest-over-taints"),
    pytest.param([taint()], [tol("", seconds=30)], NOW + 30, id="empty-key-exists-all"),
    pytest.param([taint("k", value="v")], [tol("k", operator="Equal", value="w")], NOW,
                 id="equal-wrong-value"),
    pytest.param([taint("k", value="v")], [tol("k", operator="Equal", value="v")], None,
                 id="equal-right-value"),
    pytest.param([taint()], [tol(effect="", seconds=5)], NOW + 5, id="empty-effect-all"),
    pytest.param([taint()], [tol(effect="NoSchedule")], NOW, id="other-effect"),
])
def test_ps2_eviction_time(taints: list[Obj], tolerations: list[Obj],
                           expected: float | None) -> None:
    assert eviction_time(taints=taints, tolerations=tolerations, now=NOW) == expected


def test_ps2_taint_without_time_added_counts_from_now() -> None:
    assert eviction_time(taints=[{"key": UNREACHABLE, "effect": "NoExecute"}],
                         tolerations=[tol(seconds=7)], now=NOW) == NOW + 7
