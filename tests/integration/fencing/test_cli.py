"""`skiff fence` / `skiff unfence` against `skiff up --nodes 1`: the fence agent runs as a
component, the node's kubelet is powered off and comes back, and `skiff down` still stops
the kubelet the fence agent started again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, pid_alive
from tests.integration.skiffcli import skiff


def _wait(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


def _kubelet_pid(data_dir: Path) -> int:
    state = ClusterState.load(data_dir)
    assert state is not None
    return next(c.pid for c in state.components if c.name == "kubelet-node-1")


def test_skiff_fence_and_unfence_a_node_of_skiff_up(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    data_dir = tmp_path_factory.mktemp("skiff-fence")
    second = 0
    up = skiff(data_dir, "up", "--detach", "--nodes", "1")
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        assert "fence-agent" in up.stdout
        first = _kubelet_pid(data_dir)
        fenced = skiff(data_dir, "fence", "node-1", "--reason", "cli test")
        assert fenced.returncode == 0, fenced.stderr
        assert fenced.stdout.strip() == ("fence.skiff.io/node-1 created (agent power); "
                                         "watch it with `skiff get fences`")
        _wait(lambda: "Fenced" in skiff(data_dir, "get", "fences").stdout)
        assert not pid_alive(first)
        again = skiff(data_dir, "fence", "node-1")
        assert again.returncode == 1 and "already fenced (phase Fenced)" in again.stderr

        unfenced = skiff(data_dir, "unfence", "node-1")
        assert unfenced.returncode == 0, unfenced.stderr
        assert "Unfencing" in unfenced.stdout
        assert unfenced.stdout.strip().endswith("deleted: node node-1 is unfenced")
        second = _kubelet_pid(data_dir)
        assert second != first and pid_alive(second)
        listed = skiff(data_dir, "get", "fences")
        assert "node-1" not in listed.stdout + listed.stderr
        missing = skiff(data_dir, "unfence", "node-1")
        assert missing.returncode == 1 and "is not fenced" in missing.stderr
    finally:
        down = skiff(data_dir, "down")
    assert down.returncode == 0, down.stderr
    assert second and not pid_alive(second)
