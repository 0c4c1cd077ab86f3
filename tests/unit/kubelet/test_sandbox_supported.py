"""SB1: `--sandbox=auto` needs root *and* CAP_SYS_ADMIN + CAP_NET_ADMIN, so a kubelet as root
in an unprivileged container (the compose nodes) shares the node's network instead of
leaving every pod in ContainerCreating for a sandbox it can never make."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skiff.kubelet.sandbox import manager
from skiff.kubelet.sandbox.manager import effective_capabilities, sandbox_supported

FULL = "000001ffffffffff"
DOCKER_DEFAULT = "00000000a80425fb"  # root in an unprivileged container: no 12, no 21


def status(tmp_path: Path, cap_eff: str) -> Path:
    path = tmp_path / "status"
    path.write_text(f"Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n")
    return path


def test_effective_capabilities_reads_cap_eff(tmp_path: Path) -> None:
    assert effective_capabilities(str(status(tmp_path, FULL))) == int(FULL, 16)
    assert effective_capabilities(str(tmp_path / "missing")) == 0


@pytest.mark.parametrize(("euid", "cap_eff", "mode", "expected"), [
    (0, FULL, "auto", True),
    (0, FULL, "none", False),
    (0, DOCKER_DEFAULT, "auto", False),
    (1000, FULL, "auto", False),
])
def test_sandbox_supported_needs_root_and_capabilities(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, euid: int, cap_eff: str, mode: str,
        expected: bool) -> None:
    path = str(status(tmp_path, cap_eff))
    monkeypatch.setattr(os, "geteuid", lambda: euid)  # the os module manager reads
    monkeypatch.setattr(manager, "effective_capabilities",
                        lambda: effective_capabilities(path))
    assert sandbox_supported(mode) is expected
