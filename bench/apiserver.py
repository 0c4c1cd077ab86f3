"""Apiserver benchmark: what the API costs over raw etcd, and how fast watches deliver.

Prints ratios against a baseline measured in the same run, never absolute pass/fail:
- pod creates/s through the apiserver ÷ raw etcd puts/s of the same payload size and
  concurrency (the baseline is a plain aetcd put from this process);
- watch delivery latency p50/p99 with 100 watchers: time from the create call returning to
  each watcher receiving the ADDED event;
- the cost of security (SPEC AU1-AU4): pod creates/s with TLS everywhere, client
  certificates and authorization (an RBAC-authorized identity, not the system:masters
  bypass) ÷ the same creates on the insecure apiserver.

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
from skiff.cli.security import ClusterSecurity
from skiff.client import ApiClient, Credentials
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
    raw_rate, api_rate = pods / raw_s, pods / api_s
    print(f"payload: {len(payload)} bytes, {pods} writes, concurrency {concurrency}")
    print(f"raw etcd puts/s:        {raw_rate:9.1f}")
    print(f"apiserver pod creates/s:{api_rate:9.1f}")
    print(f"ratio apiserver/etcd:   {api_rate / raw_rate:9.3f}")


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
        stopping: list[Any] = []
        etcd.start()
        try:
            wait_etcd_healthy(etcd, etcd_port)
            api.start()
            target = f"127.0.0.1:{api_port}"
            wait_grpc_healthy(api, target)
            asyncio.run(bench_writes(etcd_port, target, args.pods, args.concurrency))
            asyncio.run(bench_watch(target, args.watchers, args.events, args.write_rate))
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
