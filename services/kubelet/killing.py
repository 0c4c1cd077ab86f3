"""Stopping one container, as Kubernetes' `killContainer` does, in named steps (GT4–GT6, GT9).

grace period (GT4), replaced first by a gracePeriodOverride (the pod worker's effective
period or an eviction's, GT6/GT7) → preStop, bounded by that period, its run time
subtracted, abandoned when the period ends (GT5) → wait for this container's turn (sidecars
after the main containers, in reverse order, GT9) → the 2 s minimum, applied last (GT6) →
stop signal → SIGKILL to the whole process group when the remaining period ends → wait
until it is gone. This is the order of Kubernetes ≥ 1.28 `killContainer`.

`ContainerKiller` kills one pod's containers that way, running their preStop hooks inside
the container (kuberuntime's executePreStopHook); `PodKill` kills all of a terminating
pod's containers, again with a shorter period when one arrives (GT7); `kill_leftovers`
makes sure no process of a pod outlives it before its sandbox goes (PS1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal as signals
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from skiff.api.types import ObjView
from skiff.client import NORMAL, WARNING
from skiff.kubelet.handlers import run_handler
from skiff.kubelet.pod_events import EventSink
from skiff.kubelet.records import SIDECAR, ContainerRecord
from skiff.kubelet.runtime import ContainerConfig, ContainerRuntime
from skiff.kubelet.runtime.process import signal_number
from skiff.kubelet.termination import (
    PRESTOP_EXTENSION_SECONDS,
    KillReason,
    grace_after_prestop,
    kill_grace_period,
)

__all__ = ["ContainerKiller", "PodKill", "TerminationOrdering", "kill_container",
           "kill_leftovers"]

log = logging.getLogger(__name__)

PreStop = Callable[[ContainerRecord, float], Awaitable[None]]

# After SIGKILL a process group is gone within milliseconds; this only bounds a stuck one.
_SIGKILL_WAIT_SECONDS = 10.0


class TerminationOrdering:
    """GT9: main containers stop together; sidecar i stops once every main container and
    every sidecar declared after it has exited."""

    def __init__(self, records: Sequence[ContainerRecord]) -> None:
        self._exited: dict[str, asyncio.Event] = {}
        self._waits_for: dict[str, list[str]] = {}
        running = [r for r in records if r.running]
        mains = [r.name for r in running if r.kind != SIDECAR]
        sidecars = [r.name for r in running if r.kind == SIDECAR]
        for r in running:
            self._exited[r.name] = asyncio.Event()
        for i, name in enumerate(sidecars):
            self._waits_for[name] = mains + sidecars[i + 1:]

    async def wait_for_turn(self, name: str, timeout: float) -> float:
        """Wait (at most `timeout`) for the containers `name` must outlive; seconds waited."""
        waits = [self._exited[n].wait() for n in self._waits_for.get(name, [])]
        if not waits or timeout <= 0:
            return 0.0
        start = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for: see skiff.tasks
                await asyncio.gather(*waits)
        return time.monotonic() - start

    def exited(self, name: str) -> None:
        event = self._exited.get(name)
        if event is not None:
            event.set()


async def kill_container(record: ContainerRecord, *, pod: ObjView, runtime: ContainerRuntime,
                         reason: KillReason, stop_signal: int, run_pre_stop: PreStop,
                         override: int | None = None,
                         ordering: TerminationOrdering | None = None,
                         skip_pre_stop: bool = False) -> None:
    """Stop `record`'s container per GT4–GT6 (and GT9 with `ordering`); returns once the
    container's main process has exited and its process group was sent SIGKILL if needed."""
    handle = record.handle
    if handle is None or not handle.running:
        if ordering is not None:
            ordering.exited(record.name)
        return
    record.killing = True
    try:
        grace: float = kill_grace_period(pod, record.spec, reason, override=override)
        lifecycle = record.spec.get("lifecycle") or {}
        if lifecycle.get("preStop") and grace > 0 and not skip_pre_stop:
            start = time.monotonic()
            await run_pre_stop(record, grace)
            grace -= time.monotonic() - start
        if ordering is not None and grace > 0:
            grace -= await ordering.wait_for_turn(record.name, grace)
        grace = grace_after_prestop(grace, 0.0)
        log.info("stopping container", extra={
            "pod": f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}",
            "container": record.name, "reason": reason.value, "signal": stop_signal,
            "gracePeriod": round(grace, 3)})
        runtime.signal(handle, stop_signal)
        if grace > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await asyncio.shield(handle.exited)
        if handle.running:
            log.info("grace period over; killing the process group", extra={
                "container": record.name, "pgid": handle.pgid})
        if not runtime.gone(handle):
            runtime.signal(handle, signals.SIGKILL)  # also the group's leftover processes
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_SIGKILL_WAIT_SECONDS):
                await asyncio.shield(handle.exited)
    finally:
        record.killing = False
        if ordering is not None:
            ordering.exited(record.name)


class ContainerKiller:
    """Kills one pod's containers (`kill_container`), their preStop hooks run with
    `exec_config(r)`. `pre_stop_started`: containers whose hook already ran in this
    termination (a restarted kill does not run it again); `keep(task)`: a hook left
    running past its period (bounded by its own timeout) is kept by the pod worker."""

    def __init__(self, *, runtime: ContainerRuntime, uid: str, pod: Callable[[], ObjView],
                 exec_config: Callable[[ContainerRecord], ContainerConfig],
                 event: EventSink, keep: Callable[[asyncio.Task[Any]], None]) -> None:
        self._runtime = runtime
        self._uid = uid
        self._pod = pod
        self._exec_config = exec_config
        self._event = event
        self._keep = keep
        self.pre_stop_started: set[str] = set()

    async def kill(self, r: ContainerRecord, reason: KillReason, *,
                   override: int | None = None, ordering: TerminationOrdering | None = None,
                   skip_pre_stop: bool = False) -> None:
        stop = signal_number((r.spec.get("lifecycle") or {}).get("stopSignal"))
        await kill_container(r, pod=self._pod(), runtime=self._runtime, reason=reason,
                             stop_signal=stop, run_pre_stop=self._run_pre_stop,
                             override=override, ordering=ordering,
                             skip_pre_stop=skip_pre_stop)

    async def _run_pre_stop(self, r: ContainerRecord, grace: float) -> None:
        """GT5: run preStop for at most the period; a failing or hanging hook is logged and
        abandoned (never retried) so termination goes on."""
        hook = r.spec["lifecycle"]["preStop"]
        self.pre_stop_started.add(r.name)
        task = asyncio.create_task(run_handler(
            hook, container=r.spec, runtime=self._runtime, handle=r.handle,
            config=self._exec_config(r),
            timeout=grace + PRESTOP_EXTENSION_SECONDS),
            name=f"pre-stop:{r.name}:{self._uid}")
        try:
            done, _ = await asyncio.wait({task}, timeout=grace)
        except asyncio.CancelledError:
            # Termination restarts with a shorter period: the hook runs on, bounded by its
            # own timeout, and is not started again.
            self._keep(task)
            raise
        if not done:
            self._event(WARNING, "FailedPreStopHook",
                        f"PreStop hook for container {r.name} did not finish within the "
                        f"grace period ({grace:g}s); continuing termination")
            self._keep(task)
            return
        result = task.result()
        if not result.success:
            self._event(WARNING, "FailedPreStopHook",
                        f"PreStop hook for container {r.name} failed: {result.message}")


async def kill_leftovers(records: Sequence[ContainerRecord], runtime: ContainerRuntime) -> None:
    """PS1: return once no process of the pod's containers is left, SIGKILLing any that
    is (a process its container's main process left behind), with a growing pause."""
    delay = 0.05
    while True:
        alive = [r for r in records if r.handle is not None and not runtime.gone(r.handle)]
        if not alive:
            return
        for r in alive:
            assert r.handle is not None
            runtime.signal(r.handle, signals.SIGKILL)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


class PodKill:
    """GT4–GT9 for a whole pod: every running container killed with the pod-level period
    as its gracePeriodOverride (sidecars last, GT9); a shorter period arriving meanwhile
    (a second DELETE, `kubectl delete --now`) restarts the kill with it, as Kubernetes'
    pod workers do (the period only decreases). `period(current)`: the pod's effective
    period now; `updated`: set on every update of the pod."""

    def __init__(self, *, killer: ContainerKiller, records: Sequence[ContainerRecord],
                 period: Callable[[int], int], updated: asyncio.Event,
                 event: EventSink, pod_name: str) -> None:
        self._killer = killer
        self._records = records
        self._period = period
        self._updated = updated
        self._event = event
        self._pod_name = pod_name

    async def run(self, reason: KillReason, *, skip_pre_stop: bool, period: int) -> None:
        self._killer.pre_stop_started.clear()  # hooks of earlier (probe) kills do not count
        while True:
            running = [r for r in self._records if r.running]
            if not running:
                return
            ordering = TerminationOrdering(self._records)
            started = self._killer.pre_stop_started
            kill = asyncio.ensure_future(asyncio.gather(*(
                self._killer.kill(r, reason, override=period, ordering=ordering,
                                  skip_pre_stop=skip_pre_stop or r.name in started)
                for r in running)))
            shorter = await self._wait_for_shorter_period(kill, period)
            if shorter is None:
                return
            kill.cancel()
            await asyncio.wait({kill})
            log.info("grace period shortened during termination; restarting the kill",
                     extra={"pod": self._pod_name, "from": period, "to": shorter})
            self._event(NORMAL, "Killing", "Stopping containers with a shorter grace "
                        f"period ({shorter}s, was {period}s)")
            period = shorter

    async def _wait_for_shorter_period(self, kill: asyncio.Future[Any],
                                       period: int) -> int | None:
        """Wait for `kill`; on every pod update, recompute the effective period and return
        it as soon as it is shorter than `period`. None once `kill` finished."""
        while not kill.done():
            self._updated.clear()
            waker = asyncio.create_task(self._updated.wait())
            try:
                await asyncio.wait({kill, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waker.cancel()
            if kill.done():
                break
            shorter = self._period(period)
            if shorter < period:
                return shorter
        kill.result()
        return None
