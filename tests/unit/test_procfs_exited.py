"""`skiff.procfs.exited`: a power fence (SPEC FN2) is confirmed only once every process it
signalled has finished exiting. A multi-threaded process's leader can read Z while its
other threads still run (the fence agent once confirmed then, and the kubelet's parent
could not reap it yet); real processes, no fakes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from skiff.procfs import exited, read_stat

# The main thread leaves with pthread_exit: the leader is a zombie, a second thread runs on.
LEADER_GONE_THREAD_LEFT = (
    "import ctypes, threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,)).start()\n"
    "time.sleep(0.1)\n"
    "ctypes.CDLL(None).pthread_exit(None)\n")


def _until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _state(pid: int) -> str:
    stat = read_stat(pid)
    return stat.state if stat is not None else ""


def _ticks(pid: int) -> int:
    stat = read_stat(pid)
    assert stat is not None
    return stat.start_ticks


def test_fn2_a_running_process_has_not_exited_and_a_killed_unreaped_one_has() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ticks = _ticks(proc.pid)
        assert not exited(proc.pid, ticks)
        os.kill(proc.pid, signal.SIGKILL)
        _until(lambda: exited(proc.pid, ticks), "the killed sleep to be a zombie")
        assert _state(proc.pid) == "Z"  # not reaped yet: still in /proc
    finally:
        proc.kill()
        proc.wait()
    assert exited(proc.pid, ticks)  # reaped: no /proc entry


def test_fn2_a_reused_pid_is_another_process() -> None:
    pid = os.getpid()
    assert not exited(pid, _ticks(pid))
    assert exited(pid, _ticks(pid) + 1)


def test_fn2_a_zombie_leader_whose_thread_still_runs_has_not_exited() -> None:
    proc = subprocess.Popen([sys.executable, "-c", LEADER_GONE_THREAD_LEFT])
    try:
        ticks = _ticks(proc.pid)
        _until(lambda: _state(proc.pid) == "Z", "the leader to leave")
        stat = read_stat(proc.pid)
        assert stat is not None and not stat.alive  # what the fence agent used to trust
        assert not exited(proc.pid, ticks)
        assert proc.poll() is None  # and indeed its parent cannot reap it yet
        os.kill(proc.pid, signal.SIGKILL)
        _until(lambda: exited(proc.pid, ticks), "the last thread to exit")
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.wait()
