"""Probe workers (LC7): one task per container and probe kind, as Kubernetes' prober.

A worker ticks every `periodSeconds`; a tick runs the handler (with `timeoutSeconds`) once
`initialDelaySeconds` have passed since the container started, counting consecutive
results against `successThreshold` and `failureThreshold`. Startup gates the other two;
readiness starts as Failure and keeps running while the pod terminates (GT12); a liveness
or startup failure asks the pod worker to kill the container with the probe's own grace
period (GT4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from skiff.clock import Clock
from skiff.kubelet.handlers import HandlerResult
from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.termination import KillReason

__all__ = ["LIVENESS", "READINESS", "STARTUP", "ProbeWorker"]

log = logging.getLogger(__name__)

LIVENESS, READINESS, STARTUP = "livenessProbe", "readinessProbe", "startupProbe"

RunHandler = Callable[[dict[str, Any], float], Awaitable[HandlerResult]]


class ProbeWorker:
    def __init__(self, *, record: ContainerRecord, kind: str, run: RunHandler,
                 on_change: Callable[[], None],
                 on_failure: Callable[[ContainerRecord, KillReason, str], None],
                 started: asyncio.Event, clock: Clock) -> None:
        self.record = record
        self._clock = clock
        self.kind = kind
        self.probe: dict[str, Any] = dict(record.spec[kind])
        self._run = run
        self._on_change = on_change
        self._on_failure = on_failure
        self._started = started
        self.results: list[bool] = []

    async def run(self) -> None:
        """Probe on a ticker of `periodSeconds` (a slow probe does not shift the schedule),
        as Kubernetes' prober worker: a tick probes only once `initialDelaySeconds` have
        passed since the *container* started, and liveness/readiness only once the
        container has started (startup probe succeeded). Readiness also runs at once when
        the container starts (Kubernetes' manual trigger of a readiness probe with no
        result yet)."""
        p = self.probe
        period = max(1.0, float(p.get("periodSeconds", 10)))
        timeout = max(1.0, float(p.get("timeoutSeconds", 1)))
        success_threshold = int(p.get("successThreshold", 1))
        failure_threshold = int(p.get("failureThreshold", 3))
        initial_delay = int(p.get("initialDelaySeconds", 0))
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        successes = failures = 0
        while self.record.running:
            if self._due(initial_delay):
                result = await self._run(p, timeout)
                self.results.append(result.success)
                if result.success:
                    successes, failures = successes + 1, 0
                else:
                    successes, failures = 0, failures + 1
                if self.kind == READINESS:
                    if successes >= success_threshold and not self.record.ready:
                        self.record.ready = True
                        self._on_change()
                    elif failures >= failure_threshold and self.record.ready:
                        self.record.ready = False
                        self._on_change()
                elif self.kind == STARTUP:
                    if successes >= success_threshold:
                        self.record.started = True
                        if not self.record.spec.get(READINESS):
                            self.record.ready = True
                        self._started.set()
                        self._on_change()
                        return
                    if failures >= failure_threshold:
                        self._on_failure(self.record, KillReason.STARTUP_PROBE,
                                         f"Startup probe failed: {result.message}")
                        return
                elif failures >= failure_threshold:
                    self._on_failure(self.record, KillReason.LIVENESS_PROBE,
                                     f"Liveness probe failed: {result.message}")
                    return
            next_tick += period
            if next_tick < loop.time():  # a tick missed while probing is dropped
                next_tick += period * ((loop.time() - next_tick) // period + 1)
            await self._wait_for_tick(next_tick - loop.time())

    def _due(self, initial_delay: int) -> bool:
        if self.kind != STARTUP and not self._started.is_set():
            return False  # startup gates liveness and readiness
        handle = self.record.handle
        if handle is None:
            return False
        return int(self._clock.now() - handle.started_at) >= initial_delay

    async def _wait_for_tick(self, delay: float) -> None:
        if self.kind == READINESS and not self._started.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, delay)):  # not wait_for: skiff.tasks
                    await self._started.wait()
                return  # the manual trigger: probe now, the ticker keeps its phase
        await asyncio.sleep(max(0.0, delay))
