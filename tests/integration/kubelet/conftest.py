"""Fixtures for kubelet tests: a real kubelet process with compressed periods, and helpers
that read what the pod's own processes recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.cgroupfs import remove_recorded
from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from skiff.cluster.processes import Process
from skiff.kubelet.records import load_state
from skiff.procfs import read_stat
from tests.integration.cluster import Cluster
from tests.integration.waiting import recorded

RECORDER = str(Path(__file__).with_name("signal_recorder.py"))

# Every period compressed so the whole kubelet suite runs in a few minutes.
FAST_FLAGS = [
    "--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "4",
    "--container-restart-backoff-base", "0.5s", "--container-restart-backoff-max", "2s",
    "--capacity-cpu", "8", "--capacity-memory", "64Gi", "--eviction-monitoring-interval", "1s",
]


@dataclass
class Node:
    name: str
    process: Process
    root: Path
    cluster: Cluster

    @property
    def health_target(self) -> str:
        return self.cluster.health_targets[f"kubelet-{self.name}"]


def start_kubelet(cluster: Cluster, root: Path, *, extra: list[str] | None = None,
                  name: str | None = None) -> Node:
    node_name = name or f"node-{uuid.uuid4().hex[:6]}"
    proc = cluster.add_service(f"kubelet-{node_name}", "skiff.kubelet", [
        "--node-name", node_name, "--root-dir", str(root / node_name), *FAST_FLAGS,
        *(extra or [])])
    return Node(node_name, proc, root / node_name, cluster)


async def _drain(cluster: Cluster, node_name: str) -> None:
    async with ApiClient(cluster.api_target, retry_seconds=10) as api:
        pods = (await api.list("pods", field_selector=f"spec.nodeName={node_name}"))["items"]
        for pod in pods:
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                await api.delete("pods", meta["name"], meta["namespace"],
                                 grace_period_seconds=1)

        async def empty() -> bool:
            left = await api.list("pods", field_selector=f"spec.nodeName={node_name}")
            return not left["items"]

        await wait_until(empty, timeout=30, interval=0.2, what=f"{node_name} drained")


def _kill_leftovers(root: Path) -> None:
    """Safety net: SIGKILL, by PID, any container process group a pod dir still records."""
    for state_file in root.glob("pods/*/state.json"):
        state = load_state(state_file.parent) or {}
        for entry in (state.get("containers") or {}).values():
            stat = read_stat(int(entry.get("pid") or 0)) if entry.get("pid") else None
            if stat is not None and stat.alive and stat.start_ticks == entry.get("startTicks"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(entry["pgid"]), signal.SIGKILL)


async def stop_kubelet(node: Node) -> None:
    """Drain the node (the kubelet kills and deletes its pods), then stop the kubelet.
    Stopping a kubelet alone leaves its pods' processes running, as in Kubernetes."""
    try:
        if node.process.alive():
            await _drain(node.cluster, node.name)
    finally:
        node.process.stop()
        _kill_leftovers(node.root)
        remove_recorded([node.root])  # AU8: nothing of the node left in /sys/fs/cgroup


@pytest.fixture(scope="session")
def node(shared_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One kubelet for the tests that do not restart it."""
    n = start_kubelet(shared_cluster, tmp_path_factory.mktemp("kubelet"))
    yield n
    asyncio.run(stop_kubelet(n))


def recorder(path: Path, *flags: str) -> list[str]:
    """The command of a signal recorder writing to `path`; its deaths are watched from here
    (`watch_deaths`), since nothing inside a stopped container outlives it."""
    watch_deaths(path)
    return [sys.executable, RECORDER, str(path), *flags]


_WATCHED: set[Path] = set()


def watch_deaths(path: Path, *, lifetime: float = 600.0) -> None:
    """Append `dead <t>` to `path` when each process it recorded as `pid N` exits, timed by
    a pidfd the kernel marks readable at the exit (the containers share the node's PID
    namespace, so the recorded pid is this host's). A daemon thread, ended by `lifetime`."""
    if path in _WATCHED:
        return
    _WATCHED.add(path)

    def run() -> None:
        deadline = time.monotonic() + lifetime
        seen: set[int] = set()
        pidfds: dict[int, int] = {}
        try:
            while time.monotonic() < deadline:
                try:
                    lines = path.read_text().splitlines()
                except FileNotFoundError:
                    lines = []
                for line in lines:
                    words = line.split()
                    if len(words) == 2 and words[0] == "pid" and int(words[1]) not in seen:
                        pid = int(words[1])
                        seen.add(pid)
                        try:
                            pidfds[os.pidfd_open(pid)] = pid
                        except ProcessLookupError:
                            _append_dead(path)
                ready, _, _ = select.select(list(pidfds), [], [], 0.02) if pidfds else (
                    [], [], [])
                if not pidfds:
                    time.sleep(0.02)
                for fd in ready:
                    _append_dead(path)
                    os.close(fd)
                    del pidfds[fd]
        finally:
            for fd in pidfds:
                os.close(fd)
            _WATCHED.discard(path)

    threading.Thread(target=run, name=f"deaths:{path.name}", daemon=True).start()


def _append_dead(path: Path) -> None:
    with open(path, "a") as f:
        f.write(f"dead {time.time()}\n")


def events_of(path: Path) -> list[tuple[str, float]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [(w[0], float(w[1])) for w in (ln.split() for ln in lines) if len(w) == 2]


def first(path: Path, what: str) -> float | None:
    return next((t for name, t in events_of(path) if name == what), None)


async def wait_until(check: Callable[[], Awaitable[Any]], *, timeout: float = 20.0,
                     interval: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


async def killing_started(api: ApiClient, namespace: str, name: str = "p") -> float:
    """When the kubelet began terminating pod `name`, by its own clock: the eventTime of
    its "Killing" Event (microseconds). Timing a termination from here, not from the test's
    DELETE call, leaves out how long the kubelet took to notice on a loaded machine."""
    events = await recorded(api, namespace, reason="Killing", name=name)
    return min(parse_rfc3339(e["eventTime"]) for e in events)


async def wait_file(path: Path, what: str, *, timeout: float = 20.0) -> float:
    async def check() -> float | None:
        return first(path, what)
    result: float = await wait_until(check, timeout=timeout, what=f"{what} in {path.name}")
    return result


async def get_pod(api: ApiClient, namespace: str, name: str) -> Obj | None:
    try:
        return await api.get("pods", name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise


async def wait_phase(api: ApiClient, namespace: str, name: str, phase: str, *,
                     timeout: float = 20.0) -> Obj:
    async def check() -> Obj | None:
        pod = await get_pod(api, namespace, name)
        return pod if pod and pod.get("status", {}).get("phase") == phase else None
    result: Obj = await wait_until(check, timeout=timeout, what=f"{name} {phase}")
    return result


async def wait_gone(api: ApiClient, namespace: str, name: str, *,
                    timeout: float = 20.0) -> None:
    async def check() -> bool:
        return await get_pod(api, namespace, name) is None
    await wait_until(check, timeout=timeout, what=f"{name} deleted")


def container_status(pod: Obj, name: str) -> Obj:
    status = pod.get("status", {})
    for cs in list(status.get("containerStatuses") or []) + list(
            status.get("initContainerStatuses") or []):
        if cs["name"] == name:
            return dict(cs)
    raise AssertionError(f"no status for container {name}: {status}")


def condition(pod: Obj, type_: str) -> str | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def pod_manifest(name: str, namespace: str, node: str, containers: list[Obj], *,
                 grace: int | None = None, **spec: Any) -> Obj:
    body: Obj = {"nodeName": node, "containers": containers, **spec}
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}
