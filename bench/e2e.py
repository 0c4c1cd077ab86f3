"""The end-to-end half of bench/scheduler_perf.py: real etcd, apiserver(s) and scheduler
processes; nodes and pods created through the API; bindings counted from a watch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.api import ApiError
from skiff.cli.processes import (
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.client import ApiClient

if TYPE_CHECKING:
    from scheduler_perf import Workload

Obj = dict[str, Any]
CONCURRENCY = 32
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class E2EResult:
    nodes: int
    initial: int
    measured: int
    rate: float
    notes: str


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _profiled(proc: Process, profile_dir: str) -> Process:
    if profile_dir:
        out = Path(profile_dir) / f"{proc.name}.prof"
        i = proc.argv.index("-m")
        proc.argv[i:i] = ["-m", "cProfile", "-o", str(out)]
    return proc


async def _pool(count: int, fn: Any) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await fn(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def _node(obj: Obj) -> Obj:
    obj = dict(obj)
    obj.setdefault("apiVersion", "v1")
    obj.setdefault("kind", "Node")
    obj["status"] = {**obj.get("status", {}),
                     "conditions": [{"type": "Ready", "status": "True"}]}
    return obj


def _pod(obj: Obj) -> Obj:
    obj = dict(obj)
    obj.setdefault("apiVersion", "v1")
    obj.setdefault("kind", "Pod")
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "uid"}
    meta["namespace"] = "default"
    obj["metadata"] = meta
    spec = dict(obj.get("spec", {}))
    for c in spec.get("containers", []):
        c.setdefault("image", "busybox")
    priority = spec.pop("priority", None)
    if priority is not None:
        spec["priorityClassName"] = f"bench-{priority}"
    obj["spec"] = spec
    obj.pop("status", None)
    return obj


class Bound:
    """Counts pods whose spec.nodeName becomes set, from one watch of pods."""

    def __init__(self, api: ApiClient, prefix: str) -> None:
        self.api, self.prefix = api, prefix
        self.bound: set[str] = set()
        self.last = 0.0
        self.changed = asyncio.Event()

    async def run(self, rv: str) -> None:
        while True:
            try:
                async for ev in self.api.watch("pods", "default", resource_version=rv):
                    if ev.type == "BOOKMARK":
                        rv = ev.object["metadata"]["resourceVersion"]
                        continue
                    rv = ev.object["metadata"]["resourceVersion"]
                    name = ev.object["metadata"]["name"]
                    if (ev.type != "DELETED" and name.startswith(self.prefix)
                            and ev.object["spec"].get("nodeName") and name not in self.bound):
                        self.bound.add(name)
                        self.last = time.perf_counter()
                        self.changed.set()
            except ApiError:
                await asyncio.sleep(0.1)

    async def wait(self, count: int, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while len(self.bound) < count:
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass
        return True


async def _kubelet(api: ApiClient, rv: str) -> int:
    """Remove terminating pods as a kubelet would (PreemptionBasic's victims)."""
    removed = 0
    while True:
        try:
            async for ev in api.watch("pods", "default", resource_version=rv):
                rv = ev.object["metadata"]["resourceVersion"]
                if ev.type == "MODIFIED" and ev.object["metadata"].get("deletionTimestamp"):
                    try:
                        await api.delete("pods", ev.object["metadata"]["name"], "default",
                                         grace_period_seconds=0)
                        removed += 1
                    except ApiError:
                        pass
        except ApiError:
            await asyncio.sleep(0.1)


async def _churn(api: ApiClient, stop: asyncio.Event) -> int:
    """Create and delete unrelated pods and nodes all along (the churn workload)."""
    i = 0
    while not stop.is_set():
        name = f"churn-{i}"
        try:
            await api.create(_node({"metadata": {"name": f"churn-node-{i}"},
                                    "status": {"capacity": {"cpu": "4", "pods": "110"},
                                               "allocatable": {"cpu": "4", "pods": "110"}}}))
            await api.create(_pod({"metadata": {"name": name},
                                   "spec": {"containers": [{"name": "c"}]}}))
            await asyncio.sleep(0.05)
            await api.delete("pods", name, "default", grace_period_seconds=0)
            await api.delete("nodes", f"churn-node-{i}")
        except ApiError:
            pass
        i += 1
    return i


async def _drive(workload: Workload, scale: float, target: str,
                 pids: dict[str, int | None]) -> E2EResult:
    nodes = max(1, int(workload.nodes * scale))
    initial = int(workload.initial * scale)
    measured = max(1, int(workload.measured * scale))
    async with ApiClient(target, retry_seconds=60) as api:
        for value in (1, 10):
            try:
                await api.create({"apiVersion": "scheduling.k8s.io/v1",
                                  "kind": "PriorityClass",
                                  "metadata": {"name": f"bench-{value}"}, "value": value})
            except ApiError:
                pass
        await _pool(nodes, lambda i: api.create(_node(workload.node(i))))
        listed = await api.list("pods", "default")
        start_rv = listed["metadata"]["resourceVersion"]
        init_seen = Bound(api, "init-")
        seen = Bound(api, "pod-")
        tasks = [asyncio.create_task(init_seen.run(start_rv)),
                 asyncio.create_task(seen.run(start_rv)),
                 asyncio.create_task(_kubelet(api, start_rv))]
        stop = asyncio.Event()
        try:
            await _pool(initial, lambda i: api.create(_pod(workload.initial_pod(i))))
            await init_seen.wait(initial, timeout=600)
            churn = (asyncio.create_task(_churn(api, stop))
                     if workload.name == "SchedulingChurn" else None)
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            t0 = time.perf_counter()
            creates = asyncio.create_task(
                _pool(measured, lambda i: api.create(_pod(workload.measured_pod(i)))))
            done = await seen.wait(measured, timeout=max(120.0, measured / 5))
            elapsed = (seen.last or time.perf_counter()) - t0
            cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            stop.set()
            await creates
            churned = await churn if churn is not None else 0
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    count = len(seen.bound)
    cpu = " ".join(f"{name}={cpu1[name] - cpu0[name]:.1f}" for name in pids)
    notes = cpu + ("" if done else " (timed out)") + (f" churn={churned}" if churned else "")
    return E2EResult(nodes, initial, count, count / elapsed if elapsed > 0 else 0.0, notes)


def run_e2e(workload: Workload, scale: float, *, apiservers: int = 1,
            profile_dir: str = "") -> E2EResult:
    with tempfile.TemporaryDirectory(prefix="skiff-sched-perf-") as tmp:
        root = Path(tmp)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        env = {"SKIFF_LOG_LEVEL": "WARNING"}
        etcd = etcd_process(root / "etcd", client_port=etcd_port, peer_port=peer_port)
        extra = ["--apiserver-processes", str(apiservers)] if apiservers > 1 else []
        api = _profiled(service_process(
            "apiserver", "skiff.apiserver",
            ["--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port",
             str(api_port), *extra], log_dir=root / "logs", env=env), profile_dir)
        target = f"127.0.0.1:{api_port}"
        health = free_port()
        sched = _profiled(service_process(
            "scheduler", "skiff.scheduler",
            ["--apiserver", target, "--health-port", str(health), "--leader-elect=false"],
            log_dir=root / "logs", env=env), profile_dir)
        procs = [etcd, api, sched]
        try:
            etcd.start()
            wait_etcd_healthy(etcd, etcd_port)
            api.start()
            wait_grpc_healthy(api, target)
            sched.start()
            wait_grpc_healthy(sched, f"127.0.0.1:{health}")
            pids = {"etcd": etcd.pid, "apiserver": api.pid, "scheduler": sched.pid}
            return asyncio.run(_drive(workload, scale, target, pids))
        except Exception:
            for proc in procs:
                print(f"--- {proc.name} log:\n{proc.tail(20)}", file=sys.stderr)
            raise
        finally:
            for proc in reversed(procs):
                proc.stop()


def time_skiff_up(nodes: int = 3) -> float:
    """Seconds for `skiff up --detach` to return: every component healthy and every node
    Ready (it waits for that). The cluster is stopped afterwards."""
    skiff = str(Path(sys.executable).with_name("skiff"))
    with tempfile.TemporaryDirectory(prefix="skiff-up-bench-") as tmp:
        start = time.perf_counter()
        up = subprocess.run([skiff, "--data-dir", tmp, "up", "--detach", "--nodes", str(nodes)],
                            capture_output=True, text=True, timeout=120)
        elapsed = time.perf_counter() - start
        subprocess.run([skiff, "--data-dir", tmp, "down"], capture_output=True, timeout=120)
        if up.returncode != 0:
            raise RuntimeError(f"skiff up failed:\n{up.stdout}\n{up.stderr}")
    return elapsed
