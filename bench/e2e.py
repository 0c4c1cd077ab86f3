"""The end-to-end half of bench/scheduler_perf.py: real etcd, apiserver(s) and scheduler
processes; nodes and pods created through the API; bindings counted from a watch."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.api import ApiError
from skiff.client import ApiClient
from skiff.client.batch import batching
from skiff.cluster.processes import (
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)

if TYPE_CHECKING:
    from scheduler_perf import Workload

Obj = dict[str, Any]
CONCURRENCY = 128  # creates in flight: pods must arrive faster than they are scheduled
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


def _children(pid: int | None) -> list[int]:
    """The apiserver's replica processes (--processes)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _profile(pids: dict[str, int | None], profile_dir: str) -> list[subprocess.Popen[bytes]]:
    """py-spy (from PyPI) sampling each Skiff process into `<name>.txt` (collapsed stacks)
    until it is interrupted."""
    spy = Path(sys.executable).with_name("py-spy")
    if not profile_dir:
        return []
    if not spy.exists():
        raise SystemExit("--profile-dir needs py-spy: .venv/bin/pip install py-spy")
    Path(profile_dir).mkdir(parents=True, exist_ok=True)
    return [subprocess.Popen([str(spy), "record", "--pid", str(pid), "--format", "raw",
                              "--output", str(Path(profile_dir) / f"{name}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in pids.items() if name != "etcd" and pid]


def _stop_profile(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(60)


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
    """One watch of pods: counts pods of each name prefix whose spec.nodeName becomes set,
    and removes terminating pods as a kubelet would (PreemptionBasic's victims)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.bound: dict[str, set[str]] = {"init-": set(), "pod-": set()}
        self.last = 0.0
        self.removed = 0
        self.changed = asyncio.Event()
        self._deletes: set[asyncio.Task[Any]] = set()

    async def run(self, rv: str) -> None:
        while True:
            try:
                async for ev in self.api.watch("pods", "default", resource_version=rv,
                                               coalesce=True):
                    rv = ev.object["metadata"]["resourceVersion"]
                    if ev.type in ("BOOKMARK", "DELETED"):
                        continue
                    meta = ev.object["metadata"]
                    if meta.get("deletionTimestamp"):
                        task = asyncio.create_task(self._remove(meta["name"]))
                        self._deletes.add(task)
                        task.add_done_callback(self._deletes.discard)
                        continue
                    seen = next((names for prefix, names in self.bound.items()
                                 if meta["name"].startswith(prefix)), None)
                    if (seen is not None and ev.object["spec"].get("nodeName")
                            and meta["name"] not in seen):
                        seen.add(meta["name"])
                        self.last = time.perf_counter()
                        self.changed.set()
            except ApiError:
                await asyncio.sleep(0.1)

    async def _remove(self, name: str) -> None:
        try:
            await self.api.delete("pods", name, "default", grace_period_seconds=0)
            self.removed += 1
        except ApiError:
            pass

    async def wait(self, prefix: str, count: int, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while len(self.bound[prefix]) < count:
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass
        return True


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
                 pids: dict[str, int | None], profile_dir: str,
                 batch_creates: bool) -> E2EResult:
    nodes = max(1, int(workload.nodes * scale))
    initial = int(workload.initial * scale)
    measured = max(1, int(workload.measured * scale))
    # --batch-creates: the bench's own creates share Batch calls (issue 37), as a busy
    # controller's would; without it each is a call of its own, as client-go makes them.
    async with ApiClient(target, retry_seconds=60,
                         **batching(100 if batch_creates else 0, 0.01),
                         batch_resources=frozenset({"pods"})) as api:
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
        seen = Bound(api)
        tasks = [asyncio.create_task(seen.run(start_rv))]
        stop = asyncio.Event()
        try:
            await _pool(initial, lambda i: api.create(_pod(workload.initial_pod(i))))
            await seen.wait("init-", initial, timeout=600)
            churn = (asyncio.create_task(_churn(api, stop))
                     if workload.name == "SchedulingChurn" else None)
            spies = _profile(pids, profile_dir)
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            cpu0["bench"] = time.process_time()
            t0 = time.perf_counter()
            created = [0.0]

            async def create_all() -> None:
                await _pool(measured, lambda i: api.create(_pod(workload.measured_pod(i))))
                created[0] = time.perf_counter() - t0

            creates = asyncio.create_task(create_all())
            done = await seen.wait("pod-", measured, timeout=max(120.0, measured / 5))
            elapsed = (seen.last or time.perf_counter()) - t0
            cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            cpu1["bench"] = time.process_time()
            _stop_profile(spies)
            stop.set()
            await creates
            churned = await churn if churn is not None else 0
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    count = len(seen.bound["pod-"])
    used = {name: cpu1[name] - cpu0[name] for name in cpu1}
    # CPU milliseconds per scheduled pod: the control plane's (etcd + apiserver(s) +
    # scheduler) is issue 37's figure; the bench's own creates and watch are apart.
    per_pod = {name: 1000 * seconds / max(count, 1) for name, seconds in used.items()}
    control = sum(v for name, v in per_pod.items() if name != "bench")
    cpu = (" ".join(f"{name}={seconds:.1f}s" for name, seconds in used.items())
           + " ms/pod: " + " ".join(f"{name}={v:.2f}" for name, v in per_pod.items())
           + f" control-plane={control:.2f}")
    notes = (cpu + f" created/s={measured / created[0]:.0f}" + ("" if done else " (timed out)")
             + (f" churn={churned}" if churned else "")
             + (f" victims={seen.removed}" if seen.removed else ""))
    return E2EResult(nodes, initial, count, count / elapsed if elapsed > 0 else 0.0, notes)


def run_e2e(workload: Workload, scale: float, *, apiservers: int = 1,
            profile_dir: str = "", scheduler_args: tuple[str, ...] = (),
            batch_creates: bool = False) -> E2EResult:
    with tempfile.TemporaryDirectory(prefix="skiff-sched-perf-") as tmp:
        root = Path(tmp)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        env: dict[str, str] = {}
        quiet = ["--log-level", "WARNING"]  # as bench/apiserver.py: no log line per pod
        etcd = etcd_process(root / "etcd", client_port=etcd_port, peer_port=peer_port)
        extra = ["--processes", str(apiservers)] if apiservers > 1 else []
        api = (service_process(
            "apiserver", "skiff.apiserver",
            ["--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port",
             str(api_port), *quiet, *extra], log_dir=root / "logs", env=env))
        target = f"127.0.0.1:{api_port}"
        health = free_port()
        sched = (service_process(
            "scheduler", "skiff.scheduler",
            ["--apiserver", target, "--health-port", str(health), "--leader-elect=false",
             *quiet, *scheduler_args],
            log_dir=root / "logs", env=env))
        procs = [etcd, api, sched]
        try:
            etcd.start()
            wait_etcd_healthy(etcd, etcd_port)
            api.start()
            wait_grpc_healthy(api, target)
            sched.start()
            wait_grpc_healthy(sched, f"127.0.0.1:{health}")
            pids: dict[str, int | None] = {"etcd": etcd.pid, "apiserver": api.pid}
            for i, child in enumerate(_children(api.pid), start=2):
                pids[f"apiserver{i}"] = child
            pids["scheduler"] = sched.pid
            return asyncio.run(_drive(workload, scale, target, pids, profile_dir,
                                      batch_creates))
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
