"""Finding a local node's processes never trusts a bare PID (SPEC FN2, power agent)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, Component
from skiff.fence_agent.localnode import kubelet_root_dir, node_processes
from skiff.procfs import read_stat

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process of this test's own, in its own group, stopped by PID afterwards; its
    argv looks like a kubelet's whose root dir is this test's empty directory."""
    argv = [*SLEEP, "--root-dir", str(tmp_path / "empty")]
    proc = subprocess.Popen(argv, start_new_session=True)
    # Until the child has exec'd, /proc shows the parent's cmdline (seen under load in a
    # full run): wait for the argv the tests compare with.
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while cmdline.read_bytes().split(b"\0")[:-1] != [a.encode() for a in argv]:
        assert time.monotonic() < deadline, "the sleeper never exec'd"
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait(10)


def state_with(tmp_path: Path, argv: list[str], pid: int) -> ClusterState:
    return ClusterState(api="127.0.0.1:1", data_dir=str(tmp_path), started=time.time(),
                        components=[Component("kubelet-n1", pid, "", "", "", argv)])


def record_pod(root: Path, *, pid: int, start_ticks: int) -> None:
    pod_dir = root / "pods" / "uid-1"
    pod_dir.mkdir(parents=True)
    (pod_dir / "state.json").write_text(json.dumps({
        "namespace": "default", "name": "pet", "uid": "uid-1",
        "containers": {"main": {"pid": pid, "pgid": pid, "startTicks": start_ticks}}}))


def test_a_kubelet_is_only_found_when_its_cmdline_is_the_recorded_argv(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    argv = [*SLEEP, "--root-dir", str(tmp_path / "empty")]
    found = node_processes(state_with(tmp_path, argv, sleeper.pid), "n1")
    assert [g.pids for g in found] == [(sleeper.pid,)]
    other = node_processes(state_with(tmp_path, ["skiff-kubelet", "--node-name", "n1"],
                                      sleeper.pid), "n1")
    assert other == []  # same PID, another program: never signalled


@pytest.mark.parametrize("matching", [True, False], ids=["same-start-time", "reused-pid"])
def test_a_container_is_only_found_when_its_start_time_matches(
        tmp_path: Path, sleeper: subprocess.Popen[bytes], matching: bool) -> None:
    stat = read_stat(sleeper.pid)
    assert stat is not None
    root = tmp_path / "kubelet"
    record_pod(root, pid=sleeper.pid,
               start_ticks=stat.start_ticks if matching else stat.start_ticks - 1)
    argv = ["not-running", "--root-dir", str(root)]
    found = node_processes(state_with(tmp_path, argv, 999_999_999), "n1")
    assert [g.pgid for g in found] == ([sleeper.pid] if matching else [])


@pytest.mark.parametrize(("argv", "root"), [
    (["k", "--root-dir", "/x"], "/x"), (["k", "--root-dir=/y"], "/y"),
    (["k"], "/tmp/skiff/kubelet")])
def test_kubelet_root_dir(argv: list[str], root: str) -> None:
    assert kubelet_root_dir(argv) == Path(root)
