"""A container starts with default signal dispositions whatever the kubelet inherited: a
kubelet started under `nohup` ignores SIGHUP, exec keeps an ignored signal ignored, and a
shell cannot `trap` a signal that was ignored when it started (the SB1 sidecar's SIGHUP to
the app container went nowhere in runs started with nohup)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from skiff.kubelet.runtime.process import default_signals

SCRIPT = 'trap "echo got HUP; exit 0" HUP; echo trapping; while :; do sleep 0.1; done'


@pytest.fixture
def hup_ignored() -> Iterator[None]:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, before)


def _hup_then_wait(preexec: Callable[[], None] | None) -> tuple[int | None, str]:
    proc = subprocess.Popen(["sh", "-c", SCRIPT], stdout=subprocess.PIPE, text=True,
                            preexec_fn=preexec)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "trapping\n"
    proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
        return None, ""
    out, _ = proc.communicate()
    return proc.returncode, out


@pytest.mark.usefixtures("hup_ignored")
def test_sb1_container_traps_sighup_though_the_kubelet_ignores_it() -> None:
    assert _hup_then_wait(default_signals()) == (0, "got HUP\n")


@pytest.mark.usefixtures("hup_ignored")
def test_without_the_reset_an_inherited_ignore_defeats_the_trap() -> None:
    """The control: what containers got before (the shell never ends on HUP)."""
    assert _hup_then_wait(None) == (None, "")
