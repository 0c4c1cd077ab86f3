"""The supervisor's CrashLoopBackOff schedule and hold-downs (pure logic, fake clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, Component
from skiff.cluster.supervisor import Backoff, Supervisor, stopped_marker


@pytest.mark.parametrize(("crashes", "delay"), [
    pytest.param(1, 0.0, id="first restart at once"),
    pytest.param(2, 10.0, id="then 10s"),
    pytest.param(3, 20.0, id="doubling"),
    pytest.param(6, 160.0, id="160s"),
    pytest.param(7, 300.0, id="capped at 300s"),
    pytest.param(20, 300.0, id="stays capped"),
])
def test_issue11_restart_backoff_is_crash_loop_back_off(crashes: int, delay: float) -> None:
    assert Backoff().delay(crashes) == delay


def _dead_component(data_dir: Path, name: str) -> None:
    comp = Component(name, pid=2**22 + 12345, address="", health="", log=str(
        data_dir / f"{name}.log"), argv=["/bin/true"])
    ClusterState(api="", data_dir=str(data_dir), components=[comp], started=0).save(data_dir)


def test_issue11_supervisor_leaves_a_chaos_stopped_member_down(tmp_path: Path) -> None:
    _dead_component(tmp_path, "apiserver-1")
    stopped_marker(tmp_path, "apiserver-1").parent.mkdir(parents=True)
    stopped_marker(tmp_path, "apiserver-1").touch()
    lines: list[str] = []
    Supervisor(tmp_path, echo=lines.append).tick()
    state = ClusterState.load(tmp_path)
    assert state is not None and state.components[0].restarts == 0 and lines == []


def test_issue11_supervisor_leaves_a_fenced_kubelet_to_the_fence_agent(
        tmp_path: Path) -> None:
    _dead_component(tmp_path, "kubelet-node-2")
    (tmp_path / "fenced").mkdir()
    (tmp_path / "fenced" / "node-2").touch()
    Supervisor(tmp_path, echo=lambda _: None).tick()
    state = ClusterState.load(tmp_path)
    assert state is not None and state.components[0].restarts == 0


def test_issue11_second_crash_waits_for_the_back_off(tmp_path: Path) -> None:
    now = [100.0]
    _dead_component(tmp_path, "scheduler-1")
    sup = Supervisor(tmp_path, Backoff(10, 300), echo=lambda _: None, clock=lambda: now[0])
    sup.tick()  # first crash: restarted at once (/bin/true exits again at once)
    first = ClusterState.load(tmp_path)
    assert first is not None and first.components[0].restarts == 1
    for proc in sup.children:
        assert proc.popen is not None
        proc.popen.wait(10)
    now[0] += 1
    sup.tick()  # second crash: due in 10 s
    waiting = ClusterState.load(tmp_path)
    assert waiting is not None and waiting.components[0].restarts == 1
    now[0] += 10
    sup.tick()
    again = ClusterState.load(tmp_path)
    assert again is not None and again.components[0].restarts == 2
    for proc in sup.children:
        assert proc.popen is not None
        proc.popen.wait(10)


def test_issue11_a_new_cluster_forgets_earlier_chaos_stops(tmp_path: Path) -> None:
    from skiff.cluster.supervisor import clear_stopped

    stopped_marker(tmp_path, "etcd-2").parent.mkdir(parents=True)
    stopped_marker(tmp_path, "etcd-2").touch()
    clear_stopped(tmp_path)
    assert not stopped_marker(tmp_path, "etcd-2").exists()
    clear_stopped(tmp_path / "never-used")  # nothing to forget: no error


def test_defect_skiff_down_signals_only_its_own_supervisor_not_a_reused_pid(
        tmp_path: Path) -> None:
    """`skiff down` SIGTERMs the PID its state file names as the supervisor. On a busy
    machine that PID is soon another program's; "skiff" anywhere in its command line was
    enough (the tests' private dockerd says /var/lib/skiff-docker, every other cluster's
    process says skiff). Only the cluster's own supervisor (or a foreground `skiff up`)
    qualifies now."""
    from skiff.cluster.supervisor import is_supervisor

    mine, other = tmp_path / "mine", tmp_path / "other"
    detached = ["/usr/bin/python3", "-m", "skiff.cluster.supervisor", "--data-dir", str(mine),
                "--backoff", "1", "--backoff-max", "30"]
    assert is_supervisor(detached, mine)
    assert not is_supervisor(detached, other)  # another cluster's supervisor
    assert is_supervisor(["/venv/bin/python3", "/venv/bin/skiff", "up", "--nodes", "3"])
    assert is_supervisor(["python3", "-m", "skiff.cli.main", "--data-dir", str(mine), "up"])
    assert not is_supervisor(["dockerd", "--data-root", "/var/lib/skiff-docker/data",
                              "--host", "unix:///var/lib/skiff-docker/docker.sock"], mine)
    assert not is_supervisor(["python3", "-m", "skiff.apiserver", "--etcd-servers",
                              "http://127.0.0.1:2379"], mine)
    assert not is_supervisor(["/venv/bin/python3", "/venv/bin/skiff", "down"], mine)
