"""Apiserver benchmark: what the API costs over raw etcd, and how fast watches deliver.

Prints ratios against a baseline measured in the same run, never absolute pass/fail:
- pod creates/s through the apiserver ÷ raw etcd puts/s of the same payload size and
  concurrency (the baseline is a plain aetcd put from this process);
- watch delivery latency p50/p99 with 100 watchers spread over `--watcher-processes`
  processes (so it measures the apiserver, not one client decoding 100 streams): time from
  the create's reply (and from its start) to each watcher receiving the ADDED event;
- the apiserver's CPU per pod while `--kubelet-watches` watches of one node each are open
  (as every kubelet keeps), ÷ the same with one open;
- the cost of security (SPEC AU1-AU4): pod creates/s with TLS everywhere, client
  certificates and authorization (an RBAC-authorized identity, not the system:masters
  bypass) ÷ the same creates on the insecure apiserver.

Run: `.venv/bin/python bench/apiserver.py [--pods 2000] [--concurrency 32] [--watchers 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aetcd

from e2e import cpu_seconds  # the /proc CPU reading scheduler_perf's harness uses
from skiff.api import ApiError, Reason
from skiff.client import ApiClient, Credentials
from skiff.client.batch import batching
from skiff.cluster.processes import (
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cluster.security import ClusterSecurity
from skiff.gctuning import tune_gc
from skiff.pki import ensure_pki
from skiff.rpc import encode


def make_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


async def run_pool(count: int, concurrency: int, fn: Any) -> float:
    """Run fn(i) for i in range(count) with `concurrency` workers; returns seconds."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await fn(queue.get_nowait())

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def bench_writes(etcd_port: int, target: str, pods: int, concurrency: int) -> None:
    async with ApiClient(target) as api:
        sample = await api.create(make_pod("sample"))
    payload = encode(sample)  # the size of what the apiserver stores for one pod
    run = uuid.uuid4().hex[:6]
    async with aetcd.Client(port=etcd_port) as etcd:
        async def raw_put(i: int) -> None:
            await etcd.put(f"/bench/{run}/{i}".encode(), payload)

        await run_pool(200, concurrency, raw_put)  # warm-up
        raw_s = await run_pool(pods, concurrency, raw_put)
    async with ApiClient(target) as api:
        async def create(i: int) -> None:
            await api.create(make_pod(f"w-{run}-{i}"))

        await run_pool(200, concurrency, lambda i: create(i + 10_000_000))  # warm-up
        api_s = await run_pool(pods, concurrency, create)
    # The same creates as items of Batch calls (issue 37): 4 × concurrency callers, so a
    # batch holds what they have in flight (up to 100 items, or what 10 ms gathered).
    async with ApiClient(target, **batching(100, 0.01),
                         batch_resources=frozenset({"pods"})) as batching_api:
        async def batched(i: int) -> None:
            await batching_api.create(make_pod(f"b-{run}-{i}"))

        await run_pool(200, 4 * concurrency, lambda i: batched(i + 10_000_000))
        batch_s = await run_pool(pods, 4 * concurrency, batched)
    raw_rate, api_rate, batch_rate = pods / raw_s, pods / api_s, pods / batch_s
    print(f"payload: {len(payload)} bytes, {pods} writes, concurrency {concurrency}")
    print(f"raw etcd puts/s:        {raw_rate:9.1f}")
    print(f"apiserver pod creates/s:{api_rate:9.1f}")
    print(f"ratio apiserver/etcd:   {api_rate / raw_rate:9.3f}")
    print(f"batched creates (items)/s:{batch_rate:7.1f}   items ÷ raw etcd puts "
          f"{batch_rate / raw_rate:.3f}")


async def create_rate(api: ApiClient, pods: int, concurrency: int) -> float:
    run = uuid.uuid4().hex[:6]

    async def create(i: int) -> None:
        await api.create(make_pod(f"s-{run}-{i}"))

    await run_pool(200, concurrency, lambda i: create(i + 10_000_000))  # warm-up
    return pods / await run_pool(pods, concurrency, create)


async def bench_security(insecure_target: str, secure_target: str, sec: ClusterSecurity,
                         pods: int, concurrency: int, rounds: int = 3) -> None:
    """Alternate the two apiservers `rounds` times and compare medians: on a shared
    machine one run of each mostly measures whatever else was running."""
    plain_rates, secure_rates = [], []
    # The controller-manager's identity is authorized by RBAC (a ClusterRoleBinding).
    async with ApiClient(insecure_target, credentials=Credentials()) as plain, \
            ApiClient(secure_target,
                      credentials=sec.credentials("controller-manager")) as secure:
        for _ in range(rounds):
            plain_rates.append(await create_rate(plain, pods, concurrency))
            secure_rates.append(await create_rate(secure, pods, concurrency))
    p, s = statistics.median(plain_rates), statistics.median(secure_rates)
    print(f"insecure pod creates/s (median of {rounds}): {p:9.1f}")
    print(f"TLS+authn+authz creates/s (median of {rounds}):{s:8.1f}")
    print(f"ratio secure/insecure:  {s / p:9.3f}")


def _watcher_child(target: str, rv: str, run: str, watchers: int, events: int,
                   conn: Any, coalesce: bool) -> None:
    """One watcher process: `watchers` watch streams on one client; sends when each saw
    each ADDED (monotonic clock, shared by every process of the machine). `coalesce`: the
    streams ask for the apiserver's coalescing tick, as the scheduler's do."""
    tune_gc()  # as every Skiff component's informers run (skiff.gctuning)

    async def go() -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []
        async with ApiClient(target) as api:
            async def watch() -> None:
                count = 0
                async for ev in api.watch("pods", "default", resource_version=rv,
                                          label_selector=f"run={run}", coalesce=coalesce):
                    if ev.type == "ADDED":
                        seen.append((ev.object["metadata"]["name"], time.monotonic()))
                        count += 1
                        if count == events:
                            return

            tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
            await asyncio.sleep(1.0)  # the streams are open
            conn.send("ready")
            await asyncio.wait_for(asyncio.gather(*tasks), 300)
        return seen

    conn.send(asyncio.run(go()))
    conn.close()


def bench_watch(target: str, watchers: int, events: int, rate: float, processes: int,
                pids: dict[str, int | None], *, coalesce: bool = False) -> None:
    """The watchers run in `processes` processes of their own, so the figure is the
    apiserver's delivery, not one Python client's time to decode 100 streams."""
    async def prepare() -> str:
        async with ApiClient(target) as api:
            return str((await api.list("pods", "default"))["metadata"]["resourceVersion"])

    rv = asyncio.run(prepare())
    run = uuid.uuid4().hex[:6]
    ctx = multiprocessing.get_context("spawn")
    children = []
    per = [watchers // processes + (1 if i < watchers % processes else 0)
           for i in range(processes)]
    for count in per:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_watcher_child,
                           args=(target, rv, run, count, events, child, coalesce))
        proc.start()
        children.append((proc, parent))
    for _, conn in children:
        conn.recv()  # ready
    watching = {f"watchers{i + 1}": proc.pid for i, (proc, _) in enumerate(children)}
    cpu0 = {name: cpu_seconds(pid) for name, pid in {**pids, **watching}.items()}
    writer0 = time.process_time()
    started: dict[str, float] = {}
    replied: dict[str, float] = {}

    async def write() -> float:
        async with ApiClient(target) as api:
            async def create(i: int) -> None:
                pod = make_pod(f"lat-{run}-{i}")
                pod["metadata"]["labels"]["run"] = run
                name = pod["metadata"]["name"]
                t0 = time.monotonic()
                try:
                    await api.create(pod)
                except ApiError as err:  # a retried create whose first try got through
                    if err.reason != Reason.ALREADY_EXISTS:
                        raise
                started[name], replied[name] = t0, time.monotonic()

            # Writes are issued at `rate` per second (not one after the other), so the
            # watchers see that write rate even when one create takes longer than 1/rate.
            writes = []
            began = time.monotonic()
            for i in range(events):
                writes.append(asyncio.create_task(create(i)))
                await asyncio.sleep(max(0.0, began + (i + 1) / rate - time.monotonic()))
            await asyncio.gather(*writes)
            return events / (time.monotonic() - began)

    achieved = asyncio.run(write())
    cpu = {name: cpu_seconds(pid) - before for name, pid in {**pids, **watching}.items()
           for before in [cpu0[name]]}
    cpu["writer"] = time.process_time() - writer0
    from_start: list[float] = []
    from_reply: list[float] = []
    for proc, conn in children:
        for name, at in conn.recv():
            from_start.append(max(0.0, at - started[name]))
            from_reply.append(max(0.0, at - replied[name]))
        proc.join(60)

    def pct(values: list[float], q: float) -> float:
        values.sort()
        return values[max(0, int(len(values) * q) - 1)] * 1000

    print(f"watch delivery, {watchers} watchers in {processes} processes x {events} events "
          f"at {rate:g} writes/s (achieved {achieved:.0f}/s): from the create's reply "
          f"p50 {pct(from_reply, 0.5):.1f} ms, p99 {pct(from_reply, 0.99):.1f} ms; from its "
          f"start p50 {pct(from_start, 0.5):.1f} ms, p99 {pct(from_start, 0.99):.1f} ms")
    print("  CPU s while writing: " + " ".join(f"{k}={v:.1f}" for k, v in cpu.items()))


def bench_kubelet_watches(target: str, nodes: int, pods: int, pid: int | None) -> None:
    """One watch per kubelet, as real kubelets keep (`spec.nodeName=<node>`): the
    apiserver's CPU per pod created on a node while `nodes` such watches are open, against
    the same with one watch open (the baseline, same run). Kubernetes' cacher indexes these
    watchers by node, so the ratio stays near 1; woken for every event it grows with
    `nodes`."""
    async def measure(watches: int) -> float:
        run = uuid.uuid4().hex[:6]
        async with ApiClient(target) as api:
            rv = str((await api.list("pods", "default"))["metadata"]["resourceVersion"])
            seen = 0
            done = asyncio.Event()

            async def watch(node: str) -> None:
                nonlocal seen
                last = rv
                while True:  # resumed from its last revision, as an informer does
                    with contextlib.suppress(ApiError):
                        async for ev in api.watch("pods", "default", resource_version=last,
                                                  field_selector=f"spec.nodeName={node}"):
                            last = ev.object["metadata"]["resourceVersion"]
                            if ev.type == "ADDED":
                                seen += 1
                                if seen == pods:
                                    done.set()
                    await asyncio.sleep(0.1)

            tasks = [asyncio.create_task(watch(f"{run}-node-{i}")) for i in range(watches)]
            await asyncio.sleep(1.0 + watches / 1000)  # the streams are open
            cpu0 = cpu_seconds(pid)

            async def create(i: int) -> None:
                pod = make_pod(f"kw-{run}-{i}")
                pod["spec"]["nodeName"] = f"{run}-node-{i % watches}"
                await api.create(pod)

            await run_pool(pods, 32, create)
            try:
                await asyncio.wait_for(done.wait(), 120)
            except TimeoutError:
                raise SystemExit(f"only {seen} of {pods} pods reached their node's watch "
                                 f"in 120 s ({watches} watches)") from None
            used = cpu_seconds(pid) - cpu0
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return used * 1000 / pods

    one = asyncio.run(measure(1))
    many = asyncio.run(measure(nodes))
    print(f"kubelet watches: apiserver CPU per pod created on a node, {nodes} node watches "
          f"open {many:.2f} ms, one open {one:.2f} ms: ratio {many / one:.2f}")


def plain_apiserver(root: Path) -> tuple[Process, Process, int, int]:
    """An etcd and an insecure apiserver on it, not started yet: (etcd, apiserver, etcd's
    client port, the apiserver's port)."""
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd = etcd_process(root, client_port=etcd_port, peer_port=peer_port)
    api = service_process("apiserver", "skiff.apiserver", [
        "--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port", str(api_port),
        "--log-level", "WARNING"], log_dir=root / "logs")
    return etcd, api, etcd_port, api_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--write-rate", type=float, default=500.0,
                        help="creates per second while the watchers listen")
    parser.add_argument("--watcher-processes", type=int, default=4,
                        help="processes the watchers are spread over")
    parser.add_argument("--kubelet-watches", type=int, default=2000,
                        help="node watches (one per kubelet) open in the kubelet part")
    parser.add_argument("--coalesced-watchers", action="store_true",
                        help="the fan-out watchers ask for coalesced streams (the "
                        "apiserver's --watch-coalesce tick while busy), as the scheduler's "
                        "do; without it they get each event at once, as informers do")
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to leave out: writes, watch, kubelets, "
                        "security")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as tmp:
        root = Path(tmp)
        etcd, api, etcd_port, api_port = plain_apiserver(root)
        stopping: list[Any] = []
        etcd.start()
        try:
            wait_etcd_healthy(etcd, etcd_port)
            api.start()
            target = f"127.0.0.1:{api_port}"
            wait_grpc_healthy(api, target)
            skip = set(args.skip.split(","))
            if "writes" not in skip:
                asyncio.run(bench_writes(etcd_port, target, args.pods, args.concurrency))
            if "watch" not in skip:
                bench_watch(target, args.watchers, args.events, args.write_rate,
                            args.watcher_processes, {"etcd": etcd.pid, "apiserver": api.pid},
                            coalesce=args.coalesced_watchers)
            if "kubelets" not in skip:
                bench_kubelet_watches(target, args.kubelet_watches, args.pods, api.pid)
            if "security" in skip:
                return
            sec = ClusterSecurity(ensure_pki(root / "pki"))
            tls = sec.etcd_tls()
            s_etcd_port, s_peer_port, s_api_port = free_port(), free_port(), free_port()
            s_etcd = etcd_process(root / "secure", client_port=s_etcd_port,
                                  peer_port=s_peer_port, tls=tls)
            s_api = service_process("apiserver-secure", "skiff.apiserver", [
                "--etcd-servers", f"https://127.0.0.1:{s_etcd_port}",
                "--secure-port", str(s_api_port), "--log-level", "WARNING",
                *sec.apiserver_args()], log_dir=root / "logs")
            stopping.extend([s_api, s_etcd])
            s_etcd.start()
            wait_etcd_healthy(s_etcd, s_etcd_port, tls=tls)
            s_api.start()
            secure_target = f"127.0.0.1:{s_api_port}"
            wait_grpc_healthy(s_api, secure_target, credentials=sec.credentials())
            asyncio.run(bench_security(target, secure_target, sec, args.pods,
                                       args.concurrency))
        finally:
            for proc in stopping:
                proc.stop()
            api.stop()
            etcd.stop()


if __name__ == "__main__":
    main()
