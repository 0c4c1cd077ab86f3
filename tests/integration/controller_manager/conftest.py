"""Fixtures for the controller-manager's integration tests: real etcd, apiserver and
controller-manager processes; the tests play the kubelet (Node, Lease, pod status)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest

from skiff.api import ApiError
from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster

StartControllerManager = Callable[..., Process]

# Compressed periods: what takes Kubernetes minutes takes seconds here. NoExecute tainting
# is not rate-limited per zone here (tests about zone disruption use the defaults).
FAST = ["--node-monitor-period", "500ms", "--node-monitor-grace-period", "3s",
        "--node-eviction-rate", "100", "--secondary-node-eviction-rate", "100",
        "--large-cluster-size-threshold", "0",
        "--node-startup-grace-period", "3s", "--pod-gc-period", "500ms",
        "--pod-gc-quarantine-time", "2s", "--leader-elect-lease-duration", "3s",
        "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms"]


def start_controller_manager(cluster: Cluster, started: list[Process], *args: str,
                             lease: str = "", name: str = "") -> Process:
    """A controller-manager process with the fast periods and its own leader Lease, so
    tests sharing one apiserver do not elect each other."""
    name = name or f"controller-manager-{uuid.uuid4().hex[:6]}"
    proc = cluster.add_service(name, "skiff.controller_manager", [
        # No nodeipam by default: podCIDRs on the shared cluster's nodes would sandbox every
        # later test's pods (the sandbox tests have a cluster of their own). A test's own
        # `--controllers` comes later and wins.
        *FAST, "--controllers", "*,-nodeipam",
        "--leader-elect-resource-name", lease or f"cm-{uuid.uuid4().hex[:8]}",
        "--leader-elect-identity", name, *args])
    started.append(proc)
    return proc


@pytest.fixture(scope="package", autouse=True)
def ready_bystander(shared_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[Process]:
    """A real kubelet that stays Ready for the whole package. Kubernetes stops all NoExecute
    tainting when every zone is fully disrupted (SPEC PS2), so a test that cuts its only
    node off needs some other node to be Ready, as in any real cluster."""
    name = f"bystander-{uuid.uuid4().hex[:6]}"
    proc = shared_cluster.add_service(f"kubelet-{name}", "skiff.kubelet", [
        "--node-name", name, "--root-dir", str(tmp_path_factory.mktemp(name)),
        "--node-status-update-frequency", "1s", "--node-lease-renew-interval", "500ms"])
    yield proc
    proc.stop()
    shared_cluster.services.pop(proc.name, None)
    asyncio.run(_delete_node(shared_cluster, name))


async def _delete_node(cluster: Cluster, name: str) -> None:
    async with ApiClient(cluster.api_target, retry_seconds=10) as api:
        with contextlib.suppress(ApiError):
            await api.delete("nodes", name)


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
