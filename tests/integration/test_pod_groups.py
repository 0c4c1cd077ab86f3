"""The safety half of stopping a cluster: it ends only the container process
groups whose identity is confirmed from the kubelet's state (/proc start time), including a
group whose leader already exited, and never a process that merely reuses a recorded PID."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.podgroups import end_pod_groups, pod_groups
from skiff.procfs import group_members, read_stat


def record(root: Path, uid: str, containers: dict[str, dict[str, int]]) -> None:
    """A pod's state.json as the kubelet writes it."""
    pod_dir = root / "pods" / uid
    pod_dir.mkdir(parents=True)
    (pod_dir / "state.json").write_text(json.dumps({
        "namespace": "default", "name": uid, "uid": uid, "containers": containers}))


def alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.alive


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:  # whatever a failing test left: by PID, our own children only
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _entry(proc: subprocess.Popen[bytes], *, ticks_offset: int = 0) -> dict[str, int]:
    stat = read_stat(proc.pid)
    assert stat is not None
    return {"pid": proc.pid, "pgid": proc.pid, "startTicks": stat.start_ticks + ticks_offset}


def test_defect1_ends_a_confirmed_group_and_its_forked_children(
        tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    container = subprocess.Popen(["sh", "-c", "sleep 7779 & sleep 7779; wait"],
                                 start_new_session=True)
    spawned.append(container)
    deadline = time.monotonic() + 30
    while len(group_members(container.pid)) < 3:
        assert time.monotonic() < deadline, "the container did not fork its sleeps"
        time.sleep(0.05)
    record(tmp_path, "pod-a", {"main": _entry(container)})
    members = [m.pid for m in group_members(container.pid)]

    ended = end_pod_groups([tmp_path], grace=5)

    assert [g.pgid for g in ended] == [container.pid]
    container.wait(10)
    assert [p for p in members if alive(p)] == []


def test_defect1_a_group_whose_leader_exited_is_still_ended(
        tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    container = subprocess.Popen(["sh", "-c", "sleep 7780 & exit 0"], start_new_session=True)
    spawned.append(container)
    entry = _entry(container)
    container.wait(10)  # the leader is gone; its forked sleep keeps the group alive
    deadline = time.monotonic() + 30
    while not group_members(container.pid):
        assert time.monotonic() < deadline, "the forked sleep is not running"
        time.sleep(0.05)
    orphan = group_members(container.pid)[0].pid
    record(tmp_path, "pod-b", {"main": entry})

    assert [g.pids for g in pod_groups([tmp_path])] == [(orphan,)]
    end_pod_groups([tmp_path], grace=5)
    deadline = time.monotonic() + 10
    while alive(orphan):
        assert time.monotonic() < deadline, "the orphaned sleep survived"
        time.sleep(0.05)


def test_defect1_a_reused_pid_is_never_signalled(
        tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    bystander = subprocess.Popen(["sleep", "7781"], start_new_session=True)
    spawned.append(bystander)
    # The kubelet recorded this PID for a container that started at another time.
    record(tmp_path, "pod-c", {"main": _entry(bystander, ticks_offset=-100)})

    assert pod_groups([tmp_path]) == []
    assert end_pod_groups([tmp_path], grace=0.5) == []
    time.sleep(0.2)
    assert bystander.poll() is None
