"""Fixtures for fencing tests: a fence agent in local mode over a data dir that lists the
test's kubelets the way `skiff up`'s cluster.json does, and helpers to clean up by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import Process
from skiff.cluster.state import ClusterState, Component
from skiff.fence_agent import FINALIZER
from skiff.fence_agent.localnode import cmdline
from skiff.procfs import read_stat
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import Node, _kill_leftovers, wait_until


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("skiff-data")


@pytest.fixture(scope="module")
def fence_agent(shared_cluster: Cluster, data_dir: Path) -> Iterator[Process]:
    """One fence agent (local mode) for the module; it re-reads cluster.json each time."""
    ClusterState(api=shared_cluster.api_target, data_dir=str(data_dir), components=[],
                 started=time.time()).save(data_dir)
    name = f"fence-agent-{uuid.uuid4().hex[:6]}"
    proc = shared_cluster.add_service(name, "skiff.fence_agent", [
        "--mode", "local", "--data-dir", str(data_dir), "--resync-period", "0.5s"])
    yield proc
    proc.stop()


def register_kubelet(data_dir: Path, node: Node) -> Component:
    """Record the node's kubelet in cluster.json, as `skiff up` does."""
    state = ClusterState.load(data_dir)
    assert state is not None
    proc = node.process
    assert proc.pid is not None
    component = Component(f"kubelet-{node.name}", proc.pid, node.health_target,
                          node.health_target, str(proc.log_path), list(proc.argv))
    state.components = [c for c in state.components if c.name != component.name]
    state.components.append(component)
    state.save(data_dir)
    return component


def recorded_kubelet(data_dir: Path, node: str) -> Component:
    state = ClusterState.load(data_dir)
    assert state is not None
    return next(c for c in state.components if c.name == f"kubelet-{node}")


def stop_node(data_dir: Path, node: Node) -> None:
    """Stop the node's kubelet, also one the fence agent started, by PID (cmdline checked:
    never a process that is not that kubelet), then its pods' leftover processes."""
    node.process.stop()
    component = recorded_kubelet(data_dir, node.name)
    if cmdline(component.pid) == component.argv:
        with contextlib.suppress(ProcessLookupError):
            os.kill(component.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while alive(component.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(component.pid) and cmdline(component.pid) == component.argv:
            os.kill(component.pid, signal.SIGKILL)
    _kill_leftovers(node.root)


def alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.alive


def fence_manifest(node: str, agent: str) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Fence",
            "metadata": {"name": node, "finalizers": [FINALIZER]},
            "spec": {"nodeName": node, "agent": agent, "reason": "test",
                     "requestedBy": "tests/integration/fencing"}}


async def wait_fence_phase(api: ApiClient, node: str, phase: str, *,
                           timeout: float = 20.0) -> Obj:
    async def check() -> Obj | None:
        fence = await api.get("fences", node)
        return fence if fence.get("status", {}).get("phase") == phase else None
    result: Obj = await wait_until(check, timeout=timeout, interval=0.1,
                                   what=f"fence {node} {phase}")
    return result


async def wait_fence_gone(api: ApiClient, node: str, *, timeout: float = 30.0) -> None:
    async def gone() -> bool:
        try:
            await api.get("fences", node)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return True
            raise
        return False
    await wait_until(gone, timeout=timeout, interval=0.1, what=f"fence {node} gone")


async def events_for(api: ApiClient, name: str, namespace: str = "default") -> list[Obj]:
    items: list[Obj] = (await api.list("events", namespace))["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]
