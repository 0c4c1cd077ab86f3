"""Hollow-node benchmark: N nodes in one kubelet process (fake runtime), against a real
etcd + apiserver.

Reports whether every node stays Ready with its Lease renewed within the renew interval,
the apiserver write rate they cause (etcd revisions per second over the window: every
write is one revision) and the kubelet process's CPU use. Kubernetes' periods by default
(lease 40 s renewed every 10 s; status computed every 10 s, written when changed or every
5 min), so the write rate is what N real kubelets would cost.

Run: `.venv/bin/python bench/hollow_nodes.py [--nodes 500] [--window 60] [--pods 0]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from skiff.cluster.processes import (
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def revision(api: ApiClient) -> int:
    return int((await api.list("namespaces"))["metadata"]["resourceVersion"])


async def check_nodes(api: ApiClient, prefix: str, count: int,
                      renew_interval: float) -> dict[str, Any]:
    nodes = [n for n in (await api.list("nodes"))["items"]
             if n["metadata"]["name"].startswith(prefix + "-")]
    leases = {lease["metadata"]["name"]: lease
              for lease in (await api.list("leases", "kube-node-lease"))["items"]}
    now = time.time()
    ready = sum(1 for n in nodes if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in n["status"].get("conditions", [])))
    ages = [now - parse_rfc3339(leases[n["metadata"]["name"]]["spec"]["renewTime"])
            for n in nodes if n["metadata"]["name"] in leases]
    fresh = sum(1 for age in ages if age <= renew_interval * 1.5 + 1)
    return {"nodes": len(nodes), "ready": ready, "leases_fresh": fresh,
            "oldest_lease_s": round(max(ages), 1) if ages else None, "expected": count}


async def create_pods(api: ApiClient, prefix: str, nodes: int, pods: int) -> float:
    start = time.perf_counter()
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            await api.create({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": f"hollow-{i}", "namespace": "default"},
                              "spec": {"nodeName": f"{prefix}-{i % nodes}", "containers": [
                                  {"name": "c", "image": "pause", "command": ["pause"]}]}})

    await asyncio.gather(*(one(i) for i in range(pods)))
    running = 0
    while running < pods and time.perf_counter() - start < 120:
        items = (await api.list("pods", "default"))["items"]
        running = sum(1 for p in items if p["metadata"]["name"].startswith("hollow-")
                      and p.get("status", {}).get("phase") == "Running")
        await asyncio.sleep(0.5)
    return time.perf_counter() - start


async def measure(api_target: str, kubelet: Process, args: argparse.Namespace) -> None:
    assert kubelet.pid is not None
    async with ApiClient(api_target) as api:
        if args.pods:
            took = await create_pods(api, args.prefix, args.nodes, args.pods)
            print(f"{args.pods} pods bound to hollow nodes Running after {took:.1f}s")
        rev0, cpu0, t0 = await revision(api), cpu_seconds(kubelet.pid), time.monotonic()
        await asyncio.sleep(args.window)
        rev1, cpu1, t1 = await revision(api), cpu_seconds(kubelet.pid), time.monotonic()
        state = await check_nodes(api, args.prefix, args.nodes, args.renew_interval)
    elapsed = t1 - t0
    writes = (rev1 - rev0 - 0) / elapsed
    print(f"hollow nodes: {state['nodes']}/{args.nodes} registered, {state['ready']} Ready, "
          f"{state['leases_fresh']} leases renewed within the interval "
          f"(oldest renewTime {state['oldest_lease_s']}s ago)")
    print(f"apiserver writes: {writes:.1f}/s over {elapsed:.0f}s "
          f"({writes / args.nodes:.3f}/s per node; Kubernetes' floor is 1/renewInterval = "
          f"{1 / args.renew_interval:.3f})")
    print(f"kubelet process: CPU {100 * (cpu1 - cpu0) / elapsed:.1f}% of one core, "
          f"RSS {rss_mib(kubelet.pid):.0f} MiB")
    ok = state["nodes"] == state["ready"] == state["leases_fresh"] == args.nodes
    print("RESULT:", "all nodes Ready with fresh leases" if ok else "SOME NODES NOT HEALTHY")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--window", type=float, default=60.0, help="measurement seconds")
    parser.add_argument("--pods", type=int, default=0, help="pods to bind across the nodes")
    parser.add_argument("--renew-interval", type=float, default=10.0)
    parser.add_argument("--prefix", default="hollow")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="skiff-hollow-"))
    etcd_port, peer_port, api_port, health = free_port(), free_port(), free_port(), free_port()
    etcd = etcd_process(root, client_port=etcd_port, peer_port=peer_port)
    api_target = f"127.0.0.1:{api_port}"
    apiserver = service_process("apiserver", "skiff.apiserver", [
        "--etcd-servers", f"http://127.0.0.1:{etcd_port}", "--secure-port", str(api_port)],
        log_dir=root / "logs")
    kubelet = service_process("kubelet", "skiff.kubelet", [
        "--apiserver", api_target, "--health-port", str(health), "--runtime", "fake",
        "--hollow-nodes", str(args.nodes), "--node-name", args.prefix,
        "--root-dir", str(root / "kubelet"), "--log-level", "WARNING",
        "--node-lease-renew-interval", str(args.renew_interval)], log_dir=root / "logs")
    try:
        etcd.start()
        wait_etcd_healthy(etcd, etcd_port)
        apiserver.start()
        wait_grpc_healthy(apiserver, api_target)
        start = time.monotonic()
        kubelet.start()
        wait_grpc_healthy(kubelet, f"127.0.0.1:{health}", timeout=300)
        print(f"{args.nodes} hollow nodes registered in {time.monotonic() - start:.1f}s "
              f"(logs in {root / 'logs'})")
        asyncio.run(measure(api_target, kubelet, args))
    finally:
        for proc in (kubelet, apiserver, etcd):
            proc.stop()


if __name__ == "__main__":
    main()
