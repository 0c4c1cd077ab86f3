"""Scheduler throughput in the shape of Kubernetes' scheduler_perf (test/integration/
scheduler_perf): hollow nodes, initial pods, then measured pods, printed as pods/s next to
Kubernetes' own thresholds for the same workloads.

- SchedulingBasic: 5000 nodes, 1000 initial pods, 5000 measured (threshold 270 pods/s)
- TopologySpreading: 5000 nodes in 3 zones, 5000 initial, 5000 measured pods with a zone
  DoNotSchedule constraint (threshold 85 pods/s)
- PreemptionBasic: 500 nodes, 2000 low-priority initial pods filling them, 500 measured
  high-priority pods that must preempt (threshold 18 pods/s)

- SchedulingChurn: 1000 nodes, 1000 measured pods while other pods are created and deleted
  all along (no Kubernetes threshold)

By default it measures end to end, as Kubernetes does: a real etcd, apiserver and scheduler
(`--leader-elect=false`) as processes, nodes and pods created through the API, and
throughput = measured pods bound per second, seen on a watch of pods. PreemptionBasic's
victims are removed as a kubelet would (a force delete once they are terminating). It prints
each process's CPU seconds too. `--in-process` runs only the scheduling algorithm against
the scheduler's cache with instant binding (the ceiling); the default run measures that too
and prints e2e ÷ in-process. `--apiserver-processes 1,2` repeats the e2e run with that many
apiserver processes sharing one port (SO_REUSEPORT) when the apiserver supports it.
Pod and node templates approximate scheduler_perf's node-default / pod-default /
pod-low-priority / pod-high-priority files.

Run: `.venv/bin/python bench/scheduler_perf.py [--scale 0.1] [--workloads SchedulingBasic]`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skiff.api.testing import DO_NOT_SCHEDULE, make_node, make_pod
from skiff.gctuning import tune_gc
from skiff.scheduler.algorithm import Algorithm
from skiff.scheduler.cache import Cache
from skiff.scheduler.config import Profile
from skiff.scheduler.framework import CycleState, FitError
from skiff.scheduler.framework.registry import Handle, build_framework
from skiff.scheduler.plugins import in_tree_registry
from skiff.scheduler.podinfo import NodeFacts, PodInfo
from skiff.scheduler.queue import Nominator

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: int
    initial: int
    measured: int
    threshold: float
    node: Callable[[int], Obj]
    initial_pod: Callable[[int], Obj]
    measured_pod: Callable[[int], Obj]


def node_default(i: int) -> Obj:
    return (make_node(f"node-{i}").capacity({"cpu": "4", "memory": "32Gi", "pods": "110"})
            .label(ZONE, f"moon-{i % 3 + 1}").obj())


def pod_default(name: str) -> Obj:
    return make_pod(name).uid(name).req({"cpu": "100m", "memory": "500Mi"}).obj()


def pod_spreading(name: str) -> Obj:
    return (make_pod(name).uid(name).label("color", "blue")
            .spread(5, ZONE, DO_NOT_SCHEDULE, {"matchLabels": {"color": "blue"}})
            .req({"cpu": "100m", "memory": "500Mi"}).obj())


def pod_low(name: str) -> Obj:
    return make_pod(name).uid(name).priority(1).req({"cpu": "900m", "memory": "500Mi"}).obj()


def pod_high(name: str) -> Obj:
    return make_pod(name).uid(name).priority(10).req({"cpu": "3000m", "memory": "500Mi"}).obj()


WORKLOADS = {
    "SchedulingBasic": Workload("SchedulingBasic", 5000, 1000, 5000, 270, node_default,
                                lambda i: pod_default(f"init-{i}"),
                                lambda i: pod_default(f"pod-{i}")),
    "TopologySpreading": Workload("TopologySpreading", 5000, 5000, 5000, 85, node_default,
                                  lambda i: pod_default(f"init-{i}"),
                                  lambda i: pod_spreading(f"pod-{i}")),
    "PreemptionBasic": Workload("PreemptionBasic", 500, 2000, 500, 18, node_default,
                                lambda i: pod_low(f"init-{i}"),
                                lambda i: pod_high(f"pod-{i}")),
    "SchedulingChurn": Workload("SchedulingChurn", 1000, 0, 1000, 0, node_default,
                                lambda i: pod_default(f"init-{i}"),
                                lambda i: pod_default(f"pod-{i}")),
}


class InstantActions:
    """Preemption's API side as a kubelet that removes victims at once."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.victims = 0

    async def preempt_victim(self, victim: PodInfo, *, preemptor: PodInfo,
                             node_name: str) -> None:
        self.cache.remove_pod(victim.key)
        self.victims += 1

    async def clear_nominated_node_name(self, pod: PodInfo) -> None:
        return None


class NoPDBs:
    def list_pdbs(self) -> list[Obj]:
        return []


async def run(workload: Workload, scale: float, seed: int) -> tuple[int, int, int, float, int]:
    nodes = max(1, int(workload.nodes * scale))
    initial = int(workload.initial * scale)
    measured = max(1, int(workload.measured * scale))
    cache = Cache()
    nominator = Nominator()
    actions = InstantActions(cache)
    rng = random.Random(seed)
    handle = Handle(cache=cache, nominator=nominator, pdbs=NoPDBs(), actions=actions, rng=rng,
                    now=time.time)
    fwk = build_framework(Profile(), registry=in_tree_registry(), handle=handle)
    algorithm = Algorithm(cache=cache, rng=rng)
    for i in range(nodes):
        cache.add_node(NodeFacts.from_node(workload.node(i)))

    async def schedule(pod: PodInfo) -> bool:
        state = CycleState()
        try:
            result = algorithm.schedule_pod(fwk, state, pod)
        except FitError as fit:
            outcome, _ = await fwk.run_post_filter(state, pod, fit.diagnosis.node_to_status)
            if outcome is None or not outcome.nominated_node_name:
                return False
            nominator.add_nominated(pod, outcome.nominated_node_name)
            return await schedule(pod)
        nominator.delete_nominated(pod)
        cache.assume_pod(pod.with_node(result.suggested_host))
        cache.finish_binding(pod.key)
        return True

    for i in range(initial):
        await schedule(PodInfo.from_pod(workload.initial_pod(i)))
    pods = [PodInfo.from_pod(workload.measured_pod(i)) for i in range(measured)]
    scheduled = 0
    start = time.perf_counter()
    for pod in pods:
        scheduled += await schedule(pod)
    elapsed = time.perf_counter() - start
    return nodes, initial, scheduled, elapsed, actions.victims


def in_process_rate(workload: Workload, scale: float, seed: int) -> tuple[float, str]:
    nodes, initial, scheduled, elapsed, victims = asyncio.run(run(workload, scale, seed))
    rate = scheduled / elapsed if elapsed > 0 else float("inf")
    return rate, f"{victims} victims" if victims else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every size (0.1 runs in seconds)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--in-process", action="store_true",
                        help="only the in-process algorithm loop (the ceiling)")
    parser.add_argument("--apiserver-processes", default="1",
                        help="comma-separated apiserver process counts for the e2e run")
    parser.add_argument("--profile-dir", default="",
                        help="sample apiserver and scheduler with py-spy into this directory")
    parser.add_argument("--scheduler-args", default="",
                        help="extra scheduler flags, space-separated (e.g. --parallel-binds 64)")
    parser.add_argument("--floor-calls", type=int, default=5000,
                        help="calls of bench/grpc_floor.py's measurement first (0 = none)")
    parser.add_argument("--batch-creates", action="store_true",
                        help="the bench creates its pods in Batch calls (issue 37)")
    args = parser.parse_args()
    # The services run with skiff.gctuning's pace; the in-process ceiling is measured at
    # the same one, so e2e ÷ in-process compares like with like.
    tune_gc()
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    if args.in_process:
        print(f"{'workload (in-process ceiling)':<30} {'nodes':>6} {'measured':>9} "
              f"{'pods/s':>9} {'k8s threshold':>14}  notes")
        for name in names:
            workload = WORKLOADS[name]
            rate, notes = in_process_rate(workload, args.scale, args.seed)
            print(f"{workload.name:<30} {int(workload.nodes * args.scale):>6} "
                  f"{max(1, int(workload.measured * args.scale)):>9} {rate:>9.1f} "
                  f"{workload.threshold:>14.0f}  {notes}")
        return

    from e2e import run_e2e, time_skiff_up  # noqa: PLC0415 - the e2e harness
    from grpc_floor import transport_costs  # noqa: PLC0415 - spawns the echo server

    if args.floor_calls:
        # The transport's cost on this machine now, beside the run it explains.
        costs = transport_costs(pod_default("floor-pod"), args.floor_calls, 32)
        print("grpcio floor (CPU µs client + server): " + ", ".join(
            f"{name} {client:.0f} + {server:.0f}" for name, (_, client, server)
            in costs.items()))

    print(f"{'workload':<18} {'apis':>4} {'nodes':>6} {'initial':>8} {'measured':>9} "
          f"{'e2e pods/s':>10} {'k8s':>5} {'in-proc':>8} {'e2e/in':>6}  CPU s / notes")
    for name in names:
        workload = WORKLOADS[name]
        ceiling, _ = in_process_rate(workload, args.scale, args.seed)
        for count in [int(c) for c in args.apiserver_processes.split(",")]:
            result = run_e2e(workload, args.scale, apiservers=count,
                             profile_dir=args.profile_dir,
                             scheduler_args=tuple(args.scheduler_args.split()),
                             batch_creates=args.batch_creates)
            threshold = f"{workload.threshold:.0f}" if workload.threshold else "-"
            print(f"{workload.name:<18} {count:>4} {result.nodes:>6} {result.initial:>8} "
                  f"{result.measured:>9} {result.rate:>10.1f} {threshold:>5} {ceiling:>8.1f} "
                  f"{result.rate / ceiling:>6.2f}  {result.notes}", flush=True)
    print(f"skiff up (3 nodes, every node Ready): {time_skiff_up():.2f} s")


if __name__ == "__main__":
    main()
