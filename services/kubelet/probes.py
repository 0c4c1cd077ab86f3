"""Probe workers (LC7): one task per container and probe kind, as Kubernetes' prober.

A worker ticks every `periodSeconds`; a tick runs the handler (with `timeoutSeconds`) once
`initialDelaySeconds` have passed since the container started, counting consecutive
results against `successThreshold` and `failureThreshold`. Startup gates the other two;
readiness starts as Failure and keeps running while the pod terminates (GT12); a liveness
or startup failure asks the pod worker to kill the container with the probe's own grace
period (GT4). As Kubernetes' prober, every failed probe is reported (`on_unhealthy`, the
pod worker's Warning `Unhealthy` Event "<Kind> probe failed: <output>"), not only the one
that crosses the threshold: the event recorder folds the repeats into one Event's count.
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
# How Kubernetes names each probe in its events ("Readiness probe failed: ...").
_EVENT_NAMES = {LIVENESS: "Liveness", READINESS: "Readiness", STARTUP: "Startup"}

RunHandler = Callable[[dict[str, Any], float], Awaitable[HandlerResult]]


class ProbeWorker:
    def __init__(self, *, record: ContainerRecord, kind: str, run: RunHandler,
                 on_change: Callable[[], None],
                 on_failure: Callable[[ContainerRecord, KillReason, str], None],
                 on_unhealthy: Callable[[ContainerRecord, str], None],
                 started: asyncio.Event, clock: Clock) -> None:
        self.record = record
        self._clock = clock
        self.kind = kind
        self.probe: dict[str, Any] = dict(record.spec[kind])
        self._run = run
        self._on_change = on_change
        self._on_failure = on_failure
        self._on_unhealthy = on_unhealthy
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
                    self._report_failure(_reported(result))
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
                                         self.failure_message(_reported(result)))
                        return
                elif failures >= failure_threshold:
                    self._on_failure(self.record, KillReason.LIVENESS_PROBE,
                                     self.failure_message(_reported(result)))
                    return
            next_tick += period
            if next_tick < loop.time():  # a tick missed while probing is dropped
                next_tick += period * ((loop.time() - next_tick) // period + 1)
            await self._wait_for_tick(next_tick - loop.time())

    def failure_message(self, output: str) -> str:
        """Kubernetes' wording of a failed probe: "Readiness probe failed: <output>"."""
        return f"{_EVENT_NAMES.get(self.kind, self.kind)} probe failed: {output}"

    def _report_failure(self, output: str) -> None:
        """One report per failed probe, while the container still runs (a probe that
        failed because its container just exited says nothing about its health)."""
        if self.record.running:
            self._on_unhealthy(self.record, self.failure_message(output))

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


def _reported(result: HandlerResult) -> str:
    """What a failed probe says: an exec probe its command's output, others the reason."""
    return result.output if result.output is not None else result.message
