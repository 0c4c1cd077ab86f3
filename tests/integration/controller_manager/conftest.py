"""Fixtures for the controller-manager's integration tests: real etcd, apiserver and
controller-manager processes; the tests play the kubelet (Node, Lease, pod status)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from skiff.cli.processes import Process
from tests.integration.cluster import Cluster

StartControllerManager = Callable[..., Process]

# Compressed periods: what takes Kubernetes minutes takes seconds here.
FAST = ["--node-monitor-period", "500ms", "--node-monitor-grace-period", "3s",
        "--node-startup-grace-period", "3s", "--pod-gc-period", "500ms",
        "--pod-gc-quarantine-time", "2s", "--leader-elect-lease-duration", "3s",
        "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms"]


def start_controller_manager(cluster: Cluster, started: list[Process], *args: str,
                             lease: str = "", name: str = "") -> Process:
    """A controller-manager process with the fast periods and its own leader Lease, so
    tests sharing one apiserver do not elect each other."""
    name = name or f"controller-manager-{uuid.uuid4().hex[:6]}"
    proc = cluster.add_service(name, "skiff.controller_manager", [
        *FAST, "--leader-elect-resource-name", lease or f"cm-{uuid.uuid4().hex[:8]}",
        "--leader-elect-identity", name, *args])
    started.append(proc)
    return proc


@pytest.fixture
def controller_manager(shared_cluster: Cluster) -> Iterator[StartControllerManager]:
    """`controller_manager("--controllers", "podgc")` starts one; all stop after the test."""
    started: list[Process] = []

    def start(*args: str, lease: str = "", name: str = "") -> Process:
        return start_controller_manager(shared_cluster, started, *args, lease=lease,
                                        name=name)

    yield start
    for proc in started:
        proc.stop()
        shared_cluster.services.pop(proc.name, None)
