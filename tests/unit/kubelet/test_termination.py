"""The grace-period functions (SPEC GT4–GT7) as tables."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import make_pod
from skiff.kubelet.termination import (
    KillReason,
    container_grace_period,
    effective_grace_period,
    grace_after_prestop,
    kill_grace_period,
)

LIVENESS = {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 7}
STARTUP = {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 4}


def _pod(*, spec: int | None = 30, deletion: int | None = None) -> dict[str, Any]:
    builder = make_pod("p").container("c").probe("livenessProbe", LIVENESS).probe(
        "startupProbe", STARTUP)
    if spec is not None:
        builder.termination_grace_period(spec)
    if deletion is not None:
        builder.terminating(grace_period_seconds=deletion)
    return builder.obj()


@pytest.mark.parametrize(("pod", "reason", "expected"), [
    pytest.param(_pod(), KillReason.POD_TERMINATION, 30, id="spec-period"),
    pytest.param(_pod(deletion=5), KillReason.POD_TERMINATION, 5, id="deletion-period-wins"),
    pytest.param(_pod(), KillReason.LIVENESS_PROBE, 7, id="liveness-probe-own-period"),
    pytest.param(_pod(), KillReason.STARTUP_PROBE, 4, id="startup-probe-own-period"),
    pytest.param(_pod(deletion=12), KillReason.LIVENESS_PROBE, 12,
                 id="deletion-period-beats-the-probes"),
    pytest.param(_pod(spec=None), KillReason.POD_TERMINATION, 2, id="no-period-minimum"),
    pytest.param(_pod(deletion=0), KillReason.POD_TERMINATION, 0, id="force-deletion-zero"),
])
def test_gt4_container_grace_period(pod: dict[str, Any], reason: KillReason,
                                    expected: int) -> None:
    assert container_grace_period(pod, pod["spec"]["containers"][0], reason) == expected


def test_gt4_probe_without_its_own_period_uses_the_spec() -> None:
    pod = make_pod("p").container("c").probe("livenessProbe", {"exec": {"command": ["x"]}}) \
        .termination_grace_period(9).obj()
    container = pod["spec"]["containers"][0]
    assert container_grace_period(pod, container, KillReason.LIVENESS_PROBE) == 9


@pytest.mark.parametrize(("period", "prestop", "expected"), [
    pytest.param(5, 3, 2, id="gt5-prestop-subtracted"),
    pytest.param(10, 3, 7, id="gt5-plenty-left"),
    pytest.param(5, 4, 2, id="gt6-minimum-2s"),
    pytest.param(3, 3, 2, id="gt5-hanging-prestop-gets-2s-more"),
    pytest.param(1, 0, 2, id="gt6-minimum-applies-after-an-override-of-1"),
])
def test_gt5_gt6_grace_after_prestop(period: float, prestop: float, expected: float) -> None:
    assert grace_after_prestop(period, prestop) == expected


@pytest.mark.parametrize(("pod", "reason", "override", "expected"), [
    pytest.param(_pod(), KillReason.EVICTION, 1, 1, id="hard-eviction-override-first"),
    pytest.param(_pod(), KillReason.EVICTION, 5, 5, id="soft-eviction-override-first"),
    pytest.param(_pod(deletion=20), KillReason.POD_TERMINATION, 8, 8,
                 id="pod-worker-period-replaces-deletion-period"),
    pytest.param(_pod(), KillReason.LIVENESS_PROBE, None, 7, id="no-override-gt4"),
])
def test_gt6_override_applies_before_prestop(pod: dict[str, Any], reason: KillReason,
                                             override: int | None, expected: int) -> None:
    """Kubernetes ≥ 1.28 killContainer: the override replaces the GT4 period first, so the
    preStop hook is bounded by it; the 2 s minimum comes last (grace_after_prestop)."""
    container = pod["spec"]["containers"][0]
    assert kill_grace_period(pod, container, reason, override=override) == expected


@pytest.mark.parametrize(("pod", "current", "override", "expected"), [
    pytest.param(_pod(), 0, None, 30, id="spec-when-nothing-else"),
    pytest.param(_pod(deletion=10), 0, None, 10, id="deletion-period"),
    pytest.param(_pod(deletion=10), 0, 3, 3, id="smaller-eviction-override"),
    pytest.param(_pod(deletion=3), 0, 10, 3, id="override-cannot-lengthen"),
    pytest.param(_pod(deletion=20), 8, None, 8, id="never-longer-than-current"),
    pytest.param(_pod(deletion=5), 8, None, 5, id="shorter-deletion-shortens"),
    pytest.param(_pod(), 0, 0, 30, id="override-0-alone-falls-back-to-spec"),
    pytest.param(_pod(spec=None), 0, None, 1, id="never-below-1"),
    pytest.param(_pod(deletion=0, spec=0), 0, None, 1, id="zero-becomes-1"),
    pytest.param(_pod(deletion=0), 0, None, 30, id="gt3-force-deleted-pod-gets-its-spec-period"),
    pytest.param(_pod(deletion=0), 30, None, 30, id="gt3-force-deletion-does-not-shorten"),
    pytest.param(_pod(deletion=1), 60, None, 1, id="delete-now-shortens-a-60s-termination"),
])
def test_gt7_effective_grace_period(pod: dict[str, Any], current: int, override: int | None,
                                    expected: int) -> None:
    assert effective_grace_period(pod, current=current, override=override) == expected
