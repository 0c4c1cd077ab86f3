"""Stopping one container, as Kubernetes' `killContainer` does, in named steps (GT4–GT6, GT9).

grace period (GT4), replaced first by a gracePeriodOverride (the pod worker's effective
period or an eviction's, GT6/GT7) → preStop, bounded by that period, its run time
subtracted, abandoned when the period ends (GT5) → wait for this container's turn (sidecars
after the main containers, in reverse order, GT9) → the 2 s minimum, applied last (GT6) →
stop signal → SIGKILL to the whole process group when the remaining period ends → wait
until it is gone. This is the order of Kubernetes ≥ 1.28 `killContainer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal as signals
import time
from collections.abc import Awaitable, Callable, Sequence

from skiff.api.types import ObjView
from skiff.kubelet.records import SIDECAR, ContainerRecord
from skiff.kubelet.runtime import ContainerRuntime
from skiff.kubelet.termination import KillReason, grace_after_prestop, kill_grace_period

__all__ = ["TerminationOrdering", "kill_container"]

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
