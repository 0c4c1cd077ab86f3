"""Resource metrics of the node and its pods (SPEC AX5), what the kubelet's
`/metrics/resource` gives metrics-server: CPU usage (cores, as a rate over the last
sampling window) and working-set memory, per container and for the node.

A container in a cgroup (SPEC AU8, `cgroups.py`) is measured as Kubernetes' cAdvisor
measures it: CPU from the cgroup's usage counter, memory as its working set (usage minus
inactive file pages). Without cgroups a container is its process group (the runtime starts
each in its own), so its usage is the sum over the processes of that group, read from
`/proc/<pid>/stat` (utime + stime) and `/proc/<pid>/statm` (resident pages): the resident
set stands in for the working set. The node's CPU is `/proc/stat`'s non-idle time, its working set
MemTotal − MemAvailable. A sampler takes one snapshot every `--metrics-resolution`; an
answer is the difference of the last two, so the first one comes after two samples.

Served on the kubelet's gRPC port as `/skiff.v1.Kubelet/ResourceMetrics` (msgpack map,
see `skiff.client.metrics`); the apiserver aggregates the nodes' answers into
`metrics.k8s.io/v1beta1`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from skiff.client.metrics import METRICS_METHOD_NAME, SERVICE
from skiff.kubelet.cgroups import ContainerCgroup
from skiff.rpc.codec import encode

log = logging.getLogger(__name__)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ContainerRef:
    node: str
    namespace: str
    pod: str
    container: str
    pgid: int
    # its cgroup (AU8), read instead of the process group when there is one
    cgroup: ContainerCgroup | None = field(default=None, compare=False, hash=False)


# Each kubelet of the process lists its running containers.
ContainerLister = Callable[[], Iterable[ContainerRef]]


@dataclass(frozen=True)
class Sample:
    at: float
    node_cpu_seconds: float
    node_memory_bytes: int
    containers: dict[ContainerRef, tuple[float, int]]  # cpu seconds, resident bytes


def _process_groups() -> dict[int, tuple[float, int]]:
    """pgid → (cpu seconds, resident bytes) summed over the group's live processes."""
    groups: dict[int, tuple[float, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            statm = Path(entry.path, "statm").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        pgid = int(fields[2])
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        rss = int(statm.split()[1]) * PAGE_SIZE
        old_cpu, old_rss = groups.get(pgid, (0.0, 0))
        groups[pgid] = (old_cpu + cpu, old_rss + rss)
    return groups


def _node_cpu_seconds() -> float:
    first = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(v) for v in first]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLOCK_TICKS


def _node_working_set() -> int:
    info: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024
    return info.get("MemTotal", 0) - info.get("MemAvailable", 0)


class ResourceMetrics:
    """Register `handler()` with the kubelet's gRPC service; set `listers` when ready and
    run `sample_forever()` beside the kubelets."""

    def __init__(self, *, resolution: float) -> None:
        self.resolution = resolution
        self.listers: list[ContainerLister] = []
        self.nodes: list[str] = []
        self._samples: list[Sample] = []

    def sample(self) -> None:
        refs = [ref for lister in self.listers for ref in lister()]
        groups = _process_groups() if any(r.cgroup is None for r in refs) else {}
        containers: dict[ContainerRef, tuple[float, int]] = {}
        for ref in refs:
            usage = ref.cgroup.usage() if ref.cgroup is not None else None
            if usage is not None:
                containers[ref] = (usage.cpu_seconds, usage.working_set)
            elif ref.pgid in groups:
                containers[ref] = groups[ref.pgid]
        self._samples = [*self._samples[-1:], Sample(
            at=time.time(), node_cpu_seconds=_node_cpu_seconds(),
            node_memory_bytes=_node_working_set(), containers=containers)]

    async def sample_forever(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.sample)
            except (OSError, ValueError, IndexError) as err:
                log.warning("cannot sample resource usage", extra={"error": str(err)})
            await asyncio.sleep(self.resolution)

    def snapshot(self) -> dict[str, Any]:
        """`{"nodes": [...], "pods": [...]}` with cpu in nanocores and memory in bytes."""
        if len(self._samples) < 2:
            return {"nodes": [], "pods": []}
        old, new = self._samples
        window = max(new.at - old.at, 1e-3)
        timestamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(new.at))
        node_cpu = max(0.0, new.node_cpu_seconds - old.node_cpu_seconds) / window
        nodes = [{"name": n, "timestamp": timestamp, "window": window,
                  "cpu": int(node_cpu * 1e9), "memory": new.node_memory_bytes}
                 for n in self.nodes]
        pods: dict[tuple[str, str], dict[str, Any]] = {}
        for ref, (cpu, memory) in new.containers.items():
            before = old.containers.get(ref)
            if before is None:
                continue  # started within the window: no rate yet
            pod = pods.setdefault((ref.namespace, ref.pod), {
                "node": ref.node, "namespace": ref.namespace, "name": ref.pod,
                "timestamp": timestamp, "window": window, "containers": []})
            pod["containers"].append({"name": ref.container, "memory": memory,
                                      "cpu": int(max(0.0, cpu - before[0]) / window * 1e9)})
        return {"nodes": nodes, "pods": list(pods.values())}

    async def _metrics(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]
                       ) -> bytes:
        return encode(self.snapshot())

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            METRICS_METHOD_NAME: grpc.unary_unary_rpc_method_handler(self._metrics)})


def running_containers(kubelet: Any) -> list[ContainerRef]:
    """The running containers of one kubelet's pod workers."""
    refs = []
    cgroups = kubelet.env.cgroups
    for worker in list(kubelet.workers.values()):
        for record in worker.records:
            handle = record.handle
            if handle is not None and handle.running:
                refs.append(ContainerRef(
                    node=kubelet.node_name, namespace=worker.namespace, pod=worker.name,
                    container=record.name, pgid=handle.pgid,
                    cgroup=cgroups.container(worker.pod, record.name) if cgroups else None))
    return refs
