"""Apiserver benchmark: what the API costs over raw etcd, and how fast watches deliver.

Prints ratios against a baseline measured in the same run, never absolute pass/fail:
- pod creates/s through the apiserver ÷ raw etcd puts/s of the same payload size and
  concurrency (the baseline is a plain aetcd put from this process);
- watch delivery latency p50/p99 with 100 watchers: time from the create call returning to
  each watcher receiving the ADDED event.

Run: `.venv/bin/python bench/apiserver.py [--pods 2000] [--concurrency 32] [--watchers 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aetcd

from skiff.cli.processes import (
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.client import ApiClient
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
    raw_rate, api_rate = pods / raw_s, pods / api_s
    print(f"payload: {len(payload)} bytes, {pods} writes, concurrency {concurrency}")
    print(f"raw etcd puts/s:        {raw_rate:9.1f}")
    print(f"apiserver pod creates/s:{api_rate:9.1f}")
    print(f"ratio apiserver/etcd:   {api_rate / raw_rate:9.3f}")


async def bench_watch(target: str, watchers: int, events: int, rate: float) -> None:
    async with ApiClient(target) as api:
        rv = (await api.list("pods", "default"))["metadata"]["resourceVersion"]
        created_at: dict[str, float] = {}
        latencies: list[float] = []
        run = uuid.uuid4().hex[:6]

        async def watch() -> None:
            seen = 0
            async for ev in api.watch("pods", "default", resource_version=rv,
                                      label_selector=f"run={run}"):
                if ev.type == "ADDED":
                    now = time.perf_counter()
                    name = ev.object["metadata"]["name"]
                    while name not in created_at:  # the event beat the create's reply
                        await asyncio.sleep(0)
                    latencies.append(max(0.0, now - created_at[name]))
                    seen += 1
                    if seen == events:
                        return

        tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
        await asyncio.sleep(1.0)
        async def create(i: int) -> None:
            pod = make_pod(f"lat-{run}-{i}")
            pod["metadata"]["labels"]["run"] = run
            start = time.perf_counter()
            obj = await api.create(pod)
            created_at[obj["metadata"]["name"]] = start

        # Writes are issued at `rate` per second (not one after the other), so the watchers
        # see that write rate even when one create takes longer than 1/rate.
        writes = []
        began = time.perf_counter()
        for i in range(events):
            writes.append(asyncio.create_task(create(i)))
            await asyncio.sleep(max(0.0, began + (i + 1) / rate - time.perf_counter()))
        await asyncio.gather(*writes)
        achieved = events / (time.perf_counter() - began)
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"watch delivery, {watchers} watchers x {events} events at {rate:g} writes/s "
          f"(achieved {achieved:.0f}/s): p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--write-rate", type=float, default=500.0,
                        help="creates per second while the watchers listen")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as tmp:
        root = Path(tmp)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd = etcd_process(root, client_port=etcd_port, peer_port=peer_port)
        api = service_process("apiserver", "skiff.apiserver", [
            "--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port", str(api_port),
            "--log-level", "WARNING"], log_dir=root / "logs")
        etcd.start()
        try:
            wait_etcd_healthy(etcd, etcd_port)
            api.start()
            target = f"127.0.0.1:{api_port}"
            wait_grpc_healthy(api, target)
            asyncio.run(bench_writes(etcd_port, target, args.pods, args.concurrency))
            asyncio.run(bench_watch(target, args.watchers, args.events, args.write_rate))
        finally:
            api.stop()
            etcd.stop()


if __name__ == "__main__":
    main()
