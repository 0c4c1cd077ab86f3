"""One explore run, start to end, in a fresh cluster: the namespace and the workload's
setup, the record of the controller's identity, the controller started and ready, the
fault of the test (none in a reference run) in place, the steps, the fault healed, the
controller given time to settle, then the end state taken, the invariants checked and the
record read — and, when the run diverges from the reference, what explains it, read while
the cluster (and its event log) is still there.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.chaos.perturb import perturbation, record
from skiff.explore.cluster import ExploreError, RunCluster, start_cluster, stop_cluster
from skiff.explore.controller import Controller, Exit, command_line
from skiff.explore.explain import explain
from skiff.explore.invariants import Violation, check_invariants, referenced_resources
from skiff.explore.oracle import Difference, Mask, diff
from skiff.explore.plan import Trial
from skiff.explore.record import Trace
from skiff.explore.snapshot import Snapshot, take_snapshot
from skiff.explore.steps import StepError, run_step
from skiff.explore.target import PodController
from skiff.explore.workload import Workload

__all__ = ["Options", "RunResult", "run_once"]

RECORD = "explore-record"
FAULT = "explore-fault"
# Kinds whose objects count what happened, not what the controller decided.
NOT_COMPARED = frozenset({"events", "events.events.k8s.io", "leases.coordination.k8s.io",
                          "perturbations.skiff.io", "perturbations"})


@dataclass(frozen=True)
class Options:
    workload: Workload
    controller: str  # the command line template ("" with `identity`)
    user: str = "skiff-explore:controller"
    groups: tuple[str, ...] = ("system:masters",)
    nodes: int = 0
    cluster_config: Path | None = None
    out: Path = Path("skiff-explore")
    ready_timeout: float = 30.0  # the controller's first watch
    hold: float = 2.0  # the fault stays this long after the last step
    quiet: float = 3.0  # settled: no write by the controller for this long
    settle_timeout: float = 30.0
    fault_wait: float = 10.0  # a test run's wait step gives up after this (then goes on)
    cwd: Path = field(default_factory=Path.cwd)  # where --controller's command runs
    identity: str = ""  # a controller the setup deploys, as RBAC names it (target.py)
    controller_pods: str = ""  # its pods' label selector in the workload's namespace

    def to_json(self) -> Obj:
        return {"workload": str(self.workload.path.resolve()), "controller": self.controller,
                "user": self.user, "groups": list(self.groups), "nodes": self.nodes,
                "clusterConfig": str(self.cluster_config.resolve())
                if self.cluster_config else "",
                "readyTimeout": self.ready_timeout, "hold": self.hold, "quiet": self.quiet,
                "settleTimeout": self.settle_timeout, "faultWait": self.fault_wait,
                "cwd": str(self.cwd.resolve()), "identity": self.identity,
                "controllerPods": self.controller_pods}


@dataclass
class RunResult:
    name: str  # "reference-1", or the test's id
    test: Trial | None
    seconds: float = 0.0
    snapshot: Snapshot = field(default_factory=dict)
    entries: list[Obj] = field(default_factory=list)
    start_seq: int = 0
    step_times: list[tuple[int, str, float]] = field(default_factory=list)
    step_error: str = ""  # the reference run's: it cannot be a reference
    notes: list[str] = field(default_factory=list)  # a test run's steps that did not complete
    exits: list[Exit] = field(default_factory=list)  # the controller's own exits
    settled: bool = True
    violations: list[Violation] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)
    log: Path | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds: up, ready, steps, ...

    def mark(self, phase: str, since: float) -> float:
        now = time.monotonic()
        self.phases[phase] = round(now - since, 2)
        return now

    @property
    def trace(self) -> Trace:
        return Trace(self.entries, start_seq=self.start_seq)

    @property
    def diverged(self) -> bool:
        return bool(self.step_error or self.exits or not self.settled or self.violations
                    or self.differences)


def _subject(opts: Options) -> Obj:
    return {"user": opts.identity or opts.user}


async def _records(api: ApiClient) -> list[Obj]:
    got = await record(api, RECORD)
    return list(got.get("entries") or [])


async def _head(api: ApiClient) -> int:
    listed = await api.list("namespaces", limit=1)
    return int(listed["metadata"]["resourceVersion"])


async def _wait_ready(api: ApiClient, opts: Options,
                      controller: Controller | PodController) -> None:
    """Until the controller opened its first watch (or made its first request and then
    went quiet for a second, for one that only polls)."""
    deadline = time.monotonic() + opts.ready_timeout
    first = 0.0
    while time.monotonic() < deadline:
        entries = await _records(api)
        if any(e.get("op") == "watch" for e in entries):
            await asyncio.sleep(0.3)
            return
        if entries and not first:
            first = time.monotonic()
        if first and time.monotonic() - first > 1.0:
            return
        await asyncio.sleep(0.1)
    exits = "; ".join(e.text().splitlines()[0] for e in controller.exits)
    hint = f"does it read $KUBECONFIG? its output is in {controller.log}"
    if opts.identity:
        hint = f"did the setup deploy it with that identity, and is its pod running (it " \
               f"needs --nodes 1 or more)? see {controller.log}"
    raise ExploreError(
        f"the controller made no request as {_subject(opts)['user']} within "
        f"{opts.ready_timeout:g}s" + (f" ({exits})" if exits else "") + f": {hint}")


def settled_since(entries: list[Obj], *, healed: float) -> float | None:
    """Since when the controller has been quiet: its last committed write or the heal,
    whichever came later — or None while a controller the test crashed has not come back
    (no request of its restarted self yet: a slow restart is not a quiet controller)."""
    crashed = max((float(e.get("time") or 0) for e in entries if e.get("op") == "crash"),
                  default=0.0)
    # back: its first watch after the crash (a list-then-watch loop or an informer opens it
    # once its initial list is read), or its first read if it never watches
    watcher = any(e.get("op") == "watch" for e in entries)
    back = min((float(e.get("time") or 0) for e in entries
                if e.get("op") in (("watch",) if watcher else ("read", "watch"))
                and float(e.get("time") or 0) > crashed), default=None)
    if crashed and back is None:
        return None
    writes = [float(e.get("time") or 0) for e in entries
              if e.get("op") == "write" and e.get("code") in (None, 200, 201)]
    return max([healed, *writes, *([back] if crashed and back is not None else [])])


async def _settle(api: ApiClient, opts: Options) -> bool:
    """Until the controller has been quiet for `quiet` seconds (`settled_since`); False:
    it never was within --settle-timeout."""
    start, healed = time.monotonic(), time.time()
    while time.monotonic() - start < opts.settle_timeout:
        await asyncio.sleep(0.5)
        since = settled_since(await _records(api), healed=healed)
        if since is not None and time.time() - since >= opts.quiet:
            return True
    return False


def compared_resources(opts: Options, reference: Trace) -> list[str]:
    """The workload's `compare`, or every kind the controller read, watched or wrote in the
    reference run; and what the invariants read."""
    found = list(opts.workload.compare)
    for resource in referenced_resources(opts.workload.invariants):
        if resource not in found:
            found.append(resource)
    if opts.workload.compare:
        return found
    for e in reference.entries:
        resource = str(e.get("resource") or "")
        if e.get("op") in ("write", "read", "watch") and resource \
                and resource not in NOT_COMPARED and resource not in found:
            found.append(resource)
    return found


async def _install(api: ApiClient, opts: Options, spec: Obj,
                   controller: Controller | PodController) -> None:
    spec = {**spec, "subject": _subject(opts)}
    if "crashOnWrite" in spec:
        target = await controller.target() if isinstance(controller, PodController) \
            else {"pid": controller.pid}
        spec["crashOnWrite"] = {**spec["crashOnWrite"], "target": target}
    await api.create(perturbation(spec, name=FAULT, prefix=""))
    await asyncio.sleep(0.3)  # every apiserver's table follows it from the watch cache


async def _heal(api: ApiClient) -> None:
    try:
        await api.delete("perturbations", FAULT)
    except ApiError:
        pass  # none installed (a pinned step never reached)


async def run_once(opts: Options, name: str, *, test: Trial | None, pki: Path | None,
                   reference: tuple[Trace, Snapshot, Mask] | None,
                   stopping: list[Callable[[], None]] | None = None,
                   echo: Callable[[str], None] = lambda _: None,
                   ports: str = "") -> RunResult:
    """One run in a fresh cluster under `opts.out/runs/<name>` (`ports`: its own
    SKIFF_PORT_RANGE, see cluster.slot_port_ranges); `reference` (its trace, end state and
    mask) turns on the comparison and the explanation."""
    result = RunResult(name, test)
    run_dir = opts.out / "runs" / name
    began = time.monotonic()
    cluster = await start_cluster(run_dir / "cluster", nodes=opts.nodes,
                                  config=opts.cluster_config, pki=pki, user=opts.user,
                                  groups=opts.groups, ports=ports)
    result.mark("up", began)
    try:
        await _run_in(cluster, opts, result, run_dir, reference, echo)
    finally:
        proc = stop_cluster(cluster.data_dir)

        def stopped() -> None:
            proc.wait()
            # etcd's preallocated WAL is 60 MB a run; the logs and the record stay
            shutil.rmtree(cluster.data_dir / "etcd", ignore_errors=True)
        if stopping is not None:
            stopping.append(stopped)
        else:
            await asyncio.to_thread(stopped)
    result.seconds = time.monotonic() - began
    return result


def _controller(api: ApiClient, cluster: RunCluster, opts: Options,
                log: Path) -> Controller | PodController:
    """The command explore starts, or (`identity`) the pods the setup deployed."""
    namespace = opts.workload.namespace
    if opts.identity:
        return PodController(api, namespace, opts.controller_pods, log,
                             credentials=cluster.credentials)
    argv = command_line(opts.controller, namespace=namespace,
                        kubeconfig=cluster.controller_kubeconfig)
    return Controller(argv, {**cluster.env(), "KUBECONFIG": str(cluster.controller_kubeconfig),
                             "SKIFF_EXPLORE_NAMESPACE": namespace}, log, cwd=opts.cwd)


async def _run_in(cluster: RunCluster, opts: Options, result: RunResult, run_dir: Path,
                  reference: tuple[Trace, Snapshot, Mask] | None,
                  echo: Callable[[str], None]) -> None:
    w, test = opts.workload, result.test
    async with ApiClient(cluster.api, credentials=cluster.credentials,
                         retry_seconds=20) as api:
        at = time.monotonic()
        await api.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": w.namespace}})
        # recorded from before the setup: with --identity, the setup starts the controller
        await api.create(perturbation({"subject": _subject(opts), "record": True},
                                      name=RECORD, prefix=""))
        for step in w.setup:
            await run_step(api, step, namespace=w.namespace)
        result.log = run_dir / "controller.log"
        controller = _controller(api, cluster, opts, result.log)
        await controller.start()
        try:
            at = result.mark("setup", at)
            await _wait_ready(api, opts, controller)
            at = result.mark("ready", at)
            if test is not None and test.before_step < 0:
                await _install(api, opts, test.spec, controller)
            result.start_seq = max((int(e["seq"]) for e in await _records(api)), default=0)
            for step in w.steps:
                if test is not None and test.before_step == step.index:
                    pin = {"staleView": {"revision": await _head(api)}}
                    await _install(api, opts, pin, controller)
                if step.mutating:
                    result.step_times.append((step.index, step.describe(), time.time()))
                # under a fault a step may not complete: the end state decides; once a wait
                # gave up, the controller is stuck until the heal, so later waits are short
                patience = opts.fault_wait / 4 if result.notes else opts.fault_wait
                try:
                    if test is None:
                        await run_step(api, step, namespace=w.namespace)
                    else:
                        await asyncio.wait_for(run_step(api, step, namespace=w.namespace),
                                               min(step.timeout, patience))
                except StepError as err:
                    if test is None:
                        result.step_error = f"{step.describe()}: {err}"
                        break
                    result.notes.append(f"under the fault, {err}")
                except TimeoutError:
                    result.notes.append(f"under the fault, {step.label} ({step.describe()}) "
                                        f"did not complete within {patience:g}s")
            await asyncio.sleep(opts.hold if test is not None else 0)
            at = result.mark("steps", at)
            await _heal(api)
            result.settled = await _settle(api, opts)
            at = result.mark("settle", at)
            result.entries = await _records(api)
            (run_dir / "record.json").write_text(json.dumps(result.entries, indent=1))
            resources = compared_resources(
                opts, reference[0] if reference is not None else result.trace)
            result.snapshot = await take_snapshot(api, resources, namespaces=[w.namespace])
        finally:
            await controller.stop()
        result.exits = [e for e in controller.exits if not e.killed]
        env = {**cluster.env(), "KUBECONFIG": str(cluster.kubeconfig),
               "SKIFF_EXPLORE_NAMESPACE": w.namespace}
        result.violations = await asyncio.to_thread(
            check_invariants, w.invariants, result.snapshot, cwd=w.path.parent, env=env)
        if reference is not None:
            ref_trace, ref_snapshot, mask = reference
            result.differences = diff(ref_snapshot, result.snapshot, mask=mask)
            if result.diverged:
                result.explanation = await explain(api, ref_trace, result.trace)
