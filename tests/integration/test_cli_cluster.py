"""`skiff up` with kubelets, as a user meets it: foreground Ctrl-C, logs, crash loops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, pid_alive
from tests.integration.skiffcli import skiff

CONFIG = """kubelet:
  containerRestartBackoffBase: 0.5s
  containerRestartBackoffMax: 1s
  nodeStatusUpdateFrequency: 1s
"""


def _wait(predicate: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("skiff-node")
    config = data_dir / "config.yaml"
    config.write_text(CONFIG)
    up = skiff(data_dir, "up", "--detach", "--nodes", "1", "--config", str(config))
    assert up.returncode == 0, up.stderr + up.stdout
    yield data_dir
    skiff(data_dir, "down")


def test_up_with_a_kubelet_waits_for_node_1_ready(one_node: Path) -> None:
    nodes = skiff(one_node, "get", "nodes").stdout.splitlines()
    assert nodes[1].split()[:2] == ["node-1", "Ready"]


def test_logs_shows_a_containers_output(one_node: Path) -> None:
    pod = """apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  containers: [{name: main, image: busybox, command: [sh, -c, "echo hello from skiff"]}]
"""
    assert skiff(one_node, "apply", "-f", "-", stdin=pod).returncode == 0
    _wait(lambda: "Completed" in skiff(one_node, "get", "pod", "hello").stdout)
    logs = skiff(one_node, "logs", "hello")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.strip() == "hello from skiff"


def test_lc3_crash_loop_back_off_is_visible_in_get_pods(one_node: Path) -> None:
    pod = """apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  containers: [{name: main, image: busybox, command: [sh, -c, "exit 3"]}]
"""
    assert skiff(one_node, "apply", "-f", "-", stdin=pod).returncode == 0
    _wait(lambda: "CrashLoopBackOff" in skiff(one_node, "get", "pod", "crasher").stdout)
    describe = skiff(one_node, "describe", "pod", "crasher").stdout
    assert "Restart Count:" in describe and "Exit Code:    3" in describe


def test_up_in_the_foreground_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "skiff.cli.main", "up", "--nodes", "0", "--data-dir",
         str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "SKIFF_SERVER": ""})
    assert proc.stdout is not None
    output = []
    for line in proc.stdout:
        output.append(line)
        if "Press Ctrl-C to stop." in line:
            break
    state = ClusterState.load(tmp_path)
    assert state is not None, "".join(output)
    pids = [c.pid for c in state.components]
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, rest
    assert "stopped." in rest
    assert not any(pid_alive(p) for p in pids)


SLEEPER_POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: main, image: busybox, command: [sh, -c, "sleep {seconds}; true"]}}]
"""


def _sleepers(seconds: int) -> list[int]:
    """PIDs of live `sleep <seconds>` processes (the pods' forked children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv == [b"sleep", str(seconds).encode()] and state != "Z":
            found.append(int(entry.name))
    return found


def test_defect1_down_ends_every_pod_process_and_says_how_many(tmp_path: Path) -> None:
    """`skiff down` (its hint names the data dir) leaves no pod
    process running and prints how many process groups it ended."""
    data_dir = tmp_path / "cluster"
    other = tmp_path / "elsewhere"  # SKIFF_DATA_DIR points away: --data-dir is what counts
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    up = skiff(other, "up", "--detach", "--nodes", "1", "--config", str(config),
               "--data-dir", str(data_dir))
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        assert f"skiff down --data-dir {data_dir}" in up.stdout
        for name in ("sleeper-a", "sleeper-b"):
            applied = skiff(other, "apply", "--data-dir", str(data_dir), "-f", "-",
                            stdin=SLEEPER_POD.format(name=name, seconds=7777))
            assert applied.returncode == 0, applied.stderr
        _wait(lambda: len(_sleepers(7777)) == 2)
    finally:
        down = skiff(other, "down", "--data-dir", str(data_dir))
    assert down.returncode == 0, down.stderr
    assert _sleepers(7777) == []
    assert "ended 2 container process groups" in down.stdout, down.stdout


def test_defect1_ctrl_c_on_foreground_up_ends_every_pod_process(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "skiff.cli.main", "up", "--nodes", "1", "--config",
         str(config), "--data-dir", str(tmp_path)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "SKIFF_SERVER": ""})
    assert proc.stdout is not None
    output = []
    try:
        for line in proc.stdout:
            output.append(line)
            if "Press Ctrl-C to stop." in line:
                break
        applied = skiff(tmp_path, "apply", "-f", "-",
                        stdin=SLEEPER_POD.format(name="sleeper", seconds=7778))
        assert applied.returncode == 0, applied.stderr + "".join(output)
        _wait(lambda: len(_sleepers(7778)) == 1)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, rest
    assert "ended 1 container process group" in rest, rest
    assert _sleepers(7778) == []


def test_defect5_logs_follow_streams_until_the_container_exits(one_node: Path) -> None:
    """`skiff logs -f` prints lines as the container writes them
    and returns by itself once the container exited. The container waits for a gate file
    after its first line, so it is still running however slowly the test polls (a fixed
    4 s run could be over before a loaded machine saw it Running)."""
    gates = one_node / "gates"  # reaches the pod's own root as a hostPath volume (AU8)
    gates.mkdir(exist_ok=True)
    gate = gates / "talker-gate"
    pod = f"""apiVersion: v1
kind: Pod
metadata: {{name: talker}}
spec:
  restartPolicy: Never
  volumes: [{{name: gates, hostPath: {{path: {gates}}}}}]
  containers: [{{name: main, image: busybox,
                volumeMounts: [{{name: gates, mountPath: /gates}}],
                command: [sh, -c, "echo one; while [ ! -e /gates/talker-gate ]; do sleep 0.1;
                                   done; echo two; sleep 1; echo three"]}}]
"""
    assert skiff(one_node, "apply", "-f", "-", stdin=pod).returncode == 0
    _wait(lambda: "Running" in skiff(one_node, "get", "pod", "talker").stdout)
    follow = subprocess.Popen(
        [sys.executable, "-m", "skiff.cli.main", "logs", "-f", "talker"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SKIFF_DATA_DIR": str(one_node), "SKIFF_SERVER": ""})
    assert follow.stdout is not None
    try:
        assert follow.stdout.readline() == "one\n"  # printed while the container runs on
        assert follow.poll() is None
    finally:
        gate.touch()
    out, err = follow.communicate(timeout=60)
    assert follow.returncode == 0, err
    assert out.splitlines() == ["two", "three"], out + err


def test_defect5_logs_follow_stops_on_ctrl_c_without_a_traceback(one_node: Path) -> None:
    pod = """apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  containers: [{name: main, image: busybox,
                command: [sh, -c, "echo tick; sleep 3600"]}]
"""
    assert skiff(one_node, "apply", "-f", "-", stdin=pod).returncode == 0
    _wait(lambda: "Running" in skiff(one_node, "get", "pod", "ticker").stdout)
    follow = subprocess.Popen(
        [sys.executable, "-m", "skiff.cli.main", "logs", "ticker", "--follow"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SKIFF_DATA_DIR": str(one_node), "SKIFF_SERVER": ""})
    assert follow.stdout is not None
    try:
        assert follow.stdout.readline() == "tick\n"
        assert follow.poll() is None  # still following: the container still runs
    finally:
        follow.send_signal(signal.SIGINT)
        try:
            _, err = follow.communicate(timeout=30)
        finally:
            if follow.poll() is None:  # still there: the assertion below says so
                follow.kill()
                follow.communicate()
    assert follow.returncode == 130
    assert "Traceback" not in err
    assert skiff(one_node, "delete", "pod", "ticker", "--grace-period=0", "--force"
                 ).returncode == 0


README = Path(__file__).resolve().parents[2] / "README.md"


def test_defect12_the_tours_get_nodes_shows_the_zones_it_promises(one_node: Path) -> None:
    """The README tour's `skiff get nodes` line, run as written, shows
    the zones its comment promises."""
    line = next(ln for ln in README.read_text().splitlines()
                if ln.startswith("skiff get nodes"))
    command, _, promise = line.partition("#")
    assert "zone-a" in promise
    shown = skiff(one_node, *command.split()[1:])
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()[:2]
    assert header.split()[-1] == "ZONE"
    assert row.split()[0] == "node-1" and row.split()[-1] == "zone-a"
