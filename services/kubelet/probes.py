"""Probe workers (LC7): one task per container and probe kind, as Kubernetes' prober.

A worker waits `initialDelaySeconds`, then runs its handler every `periodSeconds` with
`timeoutSeconds`, counting consecutive results against `successThreshold` and
`failureThreshold`. Startup gates the other two; readiness starts as Failure and keeps
running while the pod terminates (GT12); a liveness or startup failure asks the pod worker
to kill the container with the probe's own grace period (GT4).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

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
                 started: asyncio.Event) -> None:
        self.record = record
        self.kind = kind
        self.probe: dict[str, Any] = dict(record.spec[kind])
        self._run = run
        self._on_change = on_change
        self._on_failure = on_failure
        self._started = started
        self.results: list[bool] = []

    async def run(self) -> None:
        p = self.probe
        period = max(1.0, float(p.get("periodSeconds", 10)))
        timeout = max(1.0, float(p.get("timeoutSeconds", 1)))
        success_threshold = int(p.get("successThreshold", 1))
        failure_threshold = int(p.get("failureThreshold", 3))
        if self.kind != STARTUP:
            await self._started.wait()  # startup gates liveness and readiness
        await asyncio.sleep(float(p.get("initialDelaySeconds", 0)))
        successes = failures = 0
        while self.record.running:
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
            await asyncio.sleep(period)
