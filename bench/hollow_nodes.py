"""Hollow-node benchmark: N nodes in K kubelet processes (fake runtime) and P pods through
the real scheduler, against a real etcd + apiserver (issue 37: 10,000 nodes, 100,000 pods).

Kubernetes' periods by default (Lease of 40 s renewed every 10 s; node status computed
every 10 s, written when changed or every 5 min), so the write rate is what N real kubelets
would cost. The run, in order:

1. K kubelets (`--hollow-nodes N/K` each, node names `<prefix><k>-<i>`) register; time
   until every Node is Ready.
2. P pods without a nodeName are created (batched, as the controllers' writes are); the
   scheduler binds them and the hollow kubelets run them: time until all are Running.
3. A quiet window: heartbeat (Lease) writes per second per node.
4. The whole pod list, paged (limit 500) and in one reply, and an informer's list + watch.

Throughout, a watch of every Lease records each renewal: a Lease is on time when no two
renewals in a row (nor the last one and the end) are more than 1.5 renew intervals apart
(the kubelet renews every interval; Kubernetes' node lifecycle controller gives up after 40 s).
A probe process writes ConfigMaps at `--probe-rate` and watches them: the delay from each
create's reply to its watch event (p50/p99) shows how watches keep up under the load.
Each process's CPU (per phase) and RSS come from /proc.

Run: `.venv/bin/python bench/hollow_nodes.py --nodes 10000 --pods 100000
--kubelet-processes 4`; `--profile DIR` records py-spy raw stacks of every Python process
during the pod phase.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skiff.api.errors import ApiError
from skiff.client import ApiClient, Informer
from skiff.clock import parse_rfc3339
from skiff.cluster.processes import (
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.rpc.codec import encode

_TICKS = os.sysconf("SC_CLK_TCK")
LEASE_NAMESPACE = "kube-node-lease"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def memory_mib(pid: int) -> tuple[float, float]:
    """(RSS now, peak RSS) in MiB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


class CpuMeter:
    """CPU seconds of each process between `mark`s: the per-phase table."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.phases: list[tuple[str, float, dict[str, float]]] = []
        self._last = (time.monotonic(), self._sample())

    def _sample(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def mark(self, phase: str) -> None:
        now, cpu = time.monotonic(), self._sample()
        start, before = self._last
        self.phases.append((phase, now - start, {n: cpu[n] - before[n] for n in cpu}))
        self._last = (now, cpu)

    def report(self) -> None:
        names = list(self.pids)
        print("CPU, % of one core per phase (seconds of CPU in brackets):")
        print(f"  {'phase':<14}{'secs':>7}" + "".join(f"{n:>17}" for n in names))
        for phase, secs, used in self.phases:
            cells = "".join(f"{100 * used[n] / secs:>9.1f}% ({used[n]:>5.0f})" for n in names)
            print(f"  {phase:<14}{secs:>7.1f}{cells}")
        print("RSS now / peak, MiB:  " + ", ".join(
            "{}: {:.0f} / {:.0f}".format(n, *memory_mib(p)) for n, p in self.pids.items()))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class LeaseTracker:
    """Every Lease renewal seen on a watch: the longest gap per Lease, per phase."""

    renew_interval: float
    last: dict[str, float] = field(default_factory=dict)  # name → last renewTime
    worst: dict[str, float] = field(default_factory=dict)  # name → longest gap this phase
    renewals: int = 0

    def observe(self, lease: dict[str, Any]) -> None:
        name = lease["metadata"]["name"]
        renew = (lease.get("spec") or {}).get("renewTime")
        if not renew:
            return
        when = parse_rfc3339(renew)
        prev = self.last.get(name)
        if prev is not None and when > prev:
            self.renewals += 1
            self.worst[name] = max(self.worst.get(name, 0.0), when - prev)
        self.last[name] = max(when, prev or when)

    def close_phase(self, phase: str, seconds: float, nodes: int) -> None:
        """Print this phase's figures and start the next one."""
        now = time.time()
        gaps = [max(self.worst.get(n, 0.0), now - t) for n, t in self.last.items()]
        late = self.renew_interval * 1.5
        on_time = sum(1 for g in gaps if g <= late)
        print(f"Leases, {phase} ({seconds:.0f}s): {self.renewals} renewals = "
              f"{self.renewals / seconds / max(nodes, 1):.3f}/s per node (one per "
              f"{self.renew_interval:.0f}s = {1 / self.renew_interval:.3f}); "
              f"{on_time}/{nodes} renewed on time (every gap <= {late:.0f}s), "
              f"{sum(1 for g in gaps if g > 40)} with a gap > 40s; longest gap p50 "
              f"{pct(gaps, 0.5):.1f}s, p99 {pct(gaps, 0.99):.1f}s, max "
              f"{max(gaps, default=0.0):.1f}s")
        self.worst.clear()
        self.renewals = 0


def lease_informer(api: ApiClient, tracker: LeaseTracker) -> Informer:
    informer = Informer(api, "leases", namespace=LEASE_NAMESPACE)
    informer.add_handler(on_add=tracker.observe, on_update=lambda _o, new: tracker.observe(new))
    return informer


async def nodes_ready(api: ApiClient) -> int | None:
    """Ready nodes, or None when the list failed as an overloaded control plane fails
    (the next poll asks again: one late etcd once ended a ten-minute run here)."""
    try:
        nodes = (await api.list_pages("nodes"))["items"]
    except ApiError as err:
        if err.code not in (429, 500, 503, 504):
            raise
        print(f"(listing the nodes failed, polling again: {err.message})", flush=True)
        return None
    return sum(1 for n in nodes if any(c["type"] == "Ready" and c["status"] == "True"
                                       for c in n["status"].get("conditions", [])))


async def create_pods(api: ApiClient, count: int, *, in_flight: int, rate: float) -> float:
    """Create `count` unscheduled pods (at most `rate` a second when given, as Kubernetes'
    density tests pace theirs); seconds it took."""
    start = time.perf_counter()
    sem = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        if rate:
            await asyncio.sleep(start + i / rate - time.perf_counter())
        async with sem:
            await api.create({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": f"hollow-{i}", "namespace": "default"},
                              "spec": {"containers": [
                                  {"name": "c", "image": "pause", "command": ["pause"]}]}})

    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - start


async def wait_running(api: ApiClient, count: int, rv: str, *, timeout: float,
                       progress: Callable[[int], None]) -> bool:
    """Watch pods entering phase Running from `rv` until `count` of them have."""
    running: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(running) < count and time.monotonic() < deadline:
        try:
            async with asyncio.timeout(deadline - time.monotonic()):
                async for ev in api.watch("pods", "default", resource_version=rv,
                                          field_selector="status.phase=Running"):
                    if ev.type == "BOOKMARK":
                        rv = ev.resource_version
                        continue
                    rv = ev.resource_version
                    if ev.type != "DELETED":
                        running.add(ev.object["metadata"]["name"])
                        if len(running) % 10000 == 0:
                            progress(len(running))
                    if len(running) >= count:
                        return True
        except TimeoutError:
            break
        except ApiError as err:  # e.g. etcd too busy to confirm the cache: watch again
            print(f"  pods watch ended ({err.reason}); resuming", flush=True)
            await asyncio.sleep(1.0)
    return len(running) >= count


async def list_figures(api: ApiClient) -> None:
    for label, paged in (("paged (limit 500)", True), ("unpaged", False)):
        start = time.perf_counter()
        if paged:
            pages, token, size, items = 0, "", 0, 0
            while True:
                page = await api.list("pods", "default", limit=500, continue_token=token)
                pages += 1
                size += len(encode(page))
                items += len(page["items"])
                token = str(page["metadata"].get("continue") or "")
                if not token:
                    break
            took = time.perf_counter() - start - 0  # encode() above is the bench's, small
        else:
            page = await api.list("pods", "default")
            took = time.perf_counter() - start
            pages, size, items = 1, len(encode(page)), len(page["items"])
        del page
        print(f"list pods {label}: {items} pods in {took:.2f}s, {pages} replies, "
              f"{size / 2**20:.1f} MiB")
    informer = Informer(api, "pods", namespace="default")
    start = time.perf_counter()
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    synced = time.perf_counter() - start
    await asyncio.sleep(2.0)  # its watch runs
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    print(f"informer on pods: list + watch synced in {synced:.2f}s "
          f"({len(informer.store)} pods in its store)")


# -- the watch-latency probe (a process of its own, so the bench's work does not delay it)


async def probe(target: str, rate: float, out: Path) -> None:
    """Create a ConfigMap every 1/rate s and watch them; write `reply_time delay` lines."""
    replied: dict[str, float] = {}
    seen: dict[str, float] = {}
    with out.open("w", buffering=1) as sink:
        def settle(name: str) -> None:
            if name in replied and name in seen:
                reply = replied.pop(name)
                sink.write(f"{reply:.6f} {max(0.0, seen.pop(name) - reply):.6f}\n")

        async with ApiClient(target) as writer, ApiClient(target) as reader:
            rv = str((await reader.list("configmaps", "default"))["metadata"]
                     ["resourceVersion"])

            async def watch() -> None:
                nonlocal rv
                while True:
                    with contextlib.suppress(Exception):
                        async for ev in reader.watch("configmaps", "default",
                                                     resource_version=rv):
                            rv = ev.resource_version
                            if ev.type == "ADDED":
                                name = ev.object["metadata"]["name"]
                                seen[name] = time.time()
                                settle(name)
                    await asyncio.sleep(0.5)

            task = asyncio.create_task(watch())
            i = 0
            next_at = time.monotonic()
            while True:
                name = f"probe-{i}"
                i += 1
                with contextlib.suppress(Exception):
                    await writer.create({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": name, "namespace": "default"},
                                         "data": {"i": str(i)}})
                    replied[name] = time.time()
                    settle(name)
                next_at += 1 / rate
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            task.cancel()


def probe_figures(path: Path, phases: list[tuple[str, float, float]]) -> None:
    samples = [tuple(map(float, line.split())) for line in path.read_text().splitlines()
               if len(line.split()) == 2]
    for phase, start, end in phases:
        delays = [1000 * d for t, d in samples if start <= t < end]
        if delays:
            print(f"watch delivery delay, {phase}: {len(delays)} writes, p50 "
                  f"{statistics.median(delays):.1f} ms, p99 {pct(delays, 0.99):.1f} ms, "
                  f"max {max(delays):.1f} ms")


# -- the run -------------------------------------------------------------------------------


async def measure(target: str, pids: dict[str, int], kubelets: list[Process],
                  health: list[int], args: argparse.Namespace, probe_out: Path,
                  start: float) -> None:
    meter = CpuMeter(pids)
    tracker = LeaseTracker(args.renew_interval)
    phases: list[tuple[str, float, float]] = []
    async with ApiClient(target) as api, ApiClient(
            target, batch=True, batch_resources=frozenset({"pods"})) as writer:
        for proc, port in zip(kubelets, health, strict=True):
            await asyncio.to_thread(wait_grpc_healthy, proc, f"127.0.0.1:{port}",
                                    timeout=900)
        ready = 0
        while ready < args.nodes and time.monotonic() - start < args.timeout:
            ready = await nodes_ready(api) or ready
            if ready < args.nodes:
                await asyncio.sleep(2.0)
        informer = lease_informer(api, tracker)
        leases = asyncio.create_task(informer.run())
        if args.nodes:
            print(f"{args.nodes} hollow nodes in {len(kubelets)} kubelet processes: all "
                  f"Ready {time.monotonic() - start:.1f}s after the kubelets started",
                  flush=True)
            # The window starts once the Lease watch is synced: on an overloaded machine
            # its first list once took the whole window, which then counted nothing.
            listed = time.monotonic()
            await informer.wait_synced(timeout=args.timeout)
            print(f"Lease informer synced in {time.monotonic() - listed:.1f}s", flush=True)
            await asyncio.sleep(args.renew_interval * 2)  # every Lease seen renewed once
            meter.mark("nodes up")
            tracker.close_phase("after registration", args.renew_interval * 2, args.nodes)
        t_wall = time.time()
        if args.pods:
            rv = str((await api.list("pods", "default", limit=1))["metadata"]
                     ["resourceVersion"])
            profiles = start_profiles(pids, args)
            t0 = time.monotonic()
            running = asyncio.create_task(wait_running(
                api, args.pods, rv, timeout=args.timeout, progress=lambda n: print(
                    f"  {n} pods Running at {time.monotonic() - t0:.1f}s", flush=True)))
            created = await create_pods(writer, args.pods, in_flight=args.in_flight,
                                        rate=args.create_rate)
            print(f"{args.pods} pods created in {created:.1f}s "
                  f"({args.pods / created:.0f}/s)", flush=True)
            if args.nodes:
                done = await running
                took = time.monotonic() - t0
                print(f"{args.pods} pods scheduled, bound and Running: "
                      f"{'after' if done else 'NOT ALL within'} {took:.1f}s", flush=True)
                tracker.close_phase("pods phase", took, args.nodes)
            else:  # no nodes: the pods stay Pending (a list and memory measurement)
                running.cancel()
            meter.mark("pods")
            phases.append(("pods phase", t_wall, time.time()))
            for proc in profiles:
                proc.wait()
        t_wall = time.time()
        profiles = [] if args.pods else start_profiles(pids, args)
        await asyncio.sleep(args.window)
        meter.mark("steady window")
        for proc in profiles:
            proc.wait()
        if args.nodes:
            tracker.close_phase("steady window", args.window, args.nodes)
        phases.append(("steady window", t_wall, time.time()))
        t_wall = time.time()
        if args.pods:
            await list_figures(api)
            meter.mark("lists")
            phases.append(("lists", t_wall, time.time()))
        leases.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leases
        at_end = await nodes_ready(api)
    print(f"nodes Ready at the end: "
          f"{'unknown (the list failed)' if at_end is None else at_end}/{args.nodes}")
    meter.report()
    probe_figures(probe_out, phases)


def apiserver_replicas(pid: int | None) -> list[int]:
    """The apiserver's replica processes (`--processes`)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def start_profiles(pids: dict[str, int], args: argparse.Namespace) -> list[subprocess.Popen[bytes]]:
    if not args.profile:
        return []
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).with_name("py-spy"))
    return [subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw",
                              "--nonblocking", "--rate", "50", "--duration",
                              str(args.profile_seconds), "-o", str(out / f"{name}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in pids.items() if name not in ("etcd", "bench", "probe")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=0, help="pods for the scheduler to bind")
    parser.add_argument("--kubelet-processes", type=int, default=1)
    parser.add_argument("--apiserver-processes", type=int, default=1)
    parser.add_argument("--window", type=float, default=60.0, help="quiet seconds measured")
    parser.add_argument("--renew-interval", type=float, default=10.0)
    parser.add_argument("--prefix", default="hollow")
    parser.add_argument("--in-flight", type=int, default=1000, help="pod creates at once")
    parser.add_argument("--create-rate", type=float, default=0.0,
                        help="pods created per second (0: as fast as they go)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="for pods to run")
    parser.add_argument("--probe-rate", type=float, default=20.0, help="probe writes/s")
    parser.add_argument("--profile", default="", help="py-spy raw stacks into this dir")
    parser.add_argument("--profile-seconds", type=int, default=60)
    parser.add_argument("--watch-probe", default="", help=argparse.SUPPRESS)
    parser.add_argument("--probe-out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watch_probe:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(probe(args.watch_probe, args.probe_rate, Path(args.probe_out)))
        return
    root = Path(tempfile.mkdtemp(prefix="skiff-hollow-"))
    logs = root / "logs"
    # The ports, all different: free_port() may hand out one again until it is bound (a
    # kubelet's health port was once the apiserver's).
    taken: set[int] = set()
    while len(taken) < 5 + args.kubelet_processes:
        taken.add(free_port())
    ports = iter(sorted(taken))
    etcd_port, peer_port, api_port = next(ports), next(ports), next(ports)
    etcd = etcd_process(root, client_port=etcd_port, peer_port=peer_port)
    target = f"127.0.0.1:{api_port}"
    quiet = ["--log-level", "WARNING"]
    replicas = ["--processes", str(args.apiserver_processes), "--http-port",
                str(next(ports))] if args.apiserver_processes > 1 else []
    apiserver = service_process("apiserver", "skiff.apiserver", [
        "--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port", str(api_port),
        *quiet, *replicas], log_dir=logs)
    sched_health = next(ports)
    scheduler = service_process("scheduler", "skiff.scheduler", [
        "--apiserver", target, "--health-port", str(sched_health), "--leader-elect=false",
        *quiet], log_dir=logs)
    k = max(1, args.kubelet_processes) if args.nodes else 0
    health = [next(ports) for _ in range(k)]
    kubelets = [service_process(f"kubelet{i}", "skiff.kubelet", [
        "--apiserver", target, "--health-port", str(health[i]), "--runtime", "fake",
        "--hollow-nodes", str(args.nodes // k + (1 if i < args.nodes % k else 0)),
        "--node-name", f"{args.prefix}{i}", "--root-dir", str(root / f"kubelet{i}"),
        *quiet, "--node-lease-renew-interval", str(args.renew_interval)], log_dir=logs)
        for i in range(k)]
    probe_out = root / "probe.txt"
    procs = [etcd, apiserver, scheduler] if args.nodes else [etcd, apiserver]
    prober: subprocess.Popen[bytes] | None = None
    print(f"logs in {logs}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the processes on the way
    try:
        etcd.start()
        wait_etcd_healthy(etcd, etcd_port)
        apiserver.start()
        wait_grpc_healthy(apiserver, target)
        if args.nodes:
            scheduler.start()
            wait_grpc_healthy(scheduler, f"127.0.0.1:{sched_health}")
        prober = subprocess.Popen([sys.executable, __file__, "--watch-probe", target,
                                   "--probe-rate", str(args.probe_rate),
                                   "--probe-out", str(probe_out)])
        started = time.monotonic()
        for proc in kubelets:
            proc.start()
            procs.append(proc)
        pids = {p.name: p.pid for p in procs if p.pid is not None}
        for i, child in enumerate(apiserver_replicas(apiserver.pid), start=2):
            pids[f"apiserver{i}"] = child
        pids.update(bench=os.getpid(), probe=prober.pid)  # they share the machine too
        asyncio.run(measure(target, pids, kubelets, health, args, probe_out, started))
    finally:
        if prober is not None:
            prober.terminate()
            prober.wait()
        for proc in reversed(procs):
            proc.stop()


if __name__ == "__main__":
    main()
