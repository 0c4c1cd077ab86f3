"""SPEC AU8: which Landlock rights and scopes a container's domain gets, by kernel ABI and
pod spec (the confinement itself is tested against real kubelets in
tests/integration/sandbox/test_landlock.py)."""

from __future__ import annotations

import pytest

from skiff.kubelet.sandbox import landlock
from skiff.kubelet.sandbox.landlock import LandlockPlan, handled_fs_rights, plan_landlock


@pytest.mark.parametrize(("abi", "rights"), [
    (1, 0x1FFF),  # EXECUTE ... MAKE_SYM
    (2, 0x3FFF),  # + REFER
    (3, 0x7FFF),  # + TRUNCATE
    (4, 0x7FFF),  # (network rights only)
    (5, 0xFFFF),  # + IOCTL_DEV
    (7, 0xFFFF)])
def test_au8_landlock_handles_every_filesystem_right_the_abi_knows(abi: int,
                                                                   rights: int) -> None:
    assert handled_fs_rights(abi) == rights


def test_au8_landlock_scopes_need_abi_6() -> None:
    assert LandlockPlan(abi=5, signals=True, abstract_sockets=True).scoped == 0
    assert LandlockPlan(abi=6, signals=True, abstract_sockets=True).scoped == 0b11


@pytest.mark.parametrize(("spec", "signals", "abstract"), [
    ({}, True, False),
    ({"shareProcessNamespace": True}, False, False),
    ({"hostNetwork": True}, True, True)])
def test_au8_landlock_plan_follows_the_pod_spec(monkeypatch: pytest.MonkeyPatch, spec: dict[
        str, bool], signals: bool, abstract: bool) -> None:
    monkeypatch.setattr(landlock, "abi_version", lambda: 7)
    plan = plan_landlock({"spec": spec}, privileged=False)
    assert plan == LandlockPlan(abi=7, signals=signals, abstract_sockets=abstract)
    assert plan_landlock({"spec": spec}, privileged=True) is None


def test_au8_no_landlock_plan_without_kernel_support(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    assert plan_landlock({"spec": {}}, privileged=False) is None
