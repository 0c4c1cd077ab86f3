"""The probes of one pod's containers: started with each attempt, stopped with it (LC7).

As Kubernetes' prober manager (AddPod / RemovePod over prober workers), a container's
startup, liveness and readiness probes each get a `probes.ProbeWorker` task when the
container starts; a container with no startup probe is started at once, and with no
readiness probe it is ready once started. What a probe result means for the pod — a
status write, a restart, an Unhealthy Event — is the pod worker's, through callbacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from skiff.clock import Clock
from skiff.kubelet.handlers import HandlerResult, run_handler
from skiff.kubelet.probes import LIVENESS, READINESS, STARTUP, ProbeWorker
from skiff.kubelet.records import APP, SIDECAR, ContainerRecord
from skiff.kubelet.runtime import ContainerConfig, ContainerRuntime
from skiff.kubelet.termination import KillReason

__all__ = ["ProbeManager"]


class ProbeManager:
    """`on_change`: a probe changed a container's started/ready; `on_failure`: a liveness
    or startup probe reached its failureThreshold; `on_unhealthy`: a probe failed."""

    def __init__(self, *, runtime: ContainerRuntime, clock: Clock,
                 on_change: Callable[[], None],
                 on_failure: Callable[[ContainerRecord, KillReason, str], None],
                 on_unhealthy: Callable[[ContainerRecord, str], None]) -> None:
        self._runtime = runtime
        self._clock = clock
        self._on_change = on_change
        self._on_failure = on_failure
        self._on_unhealthy = on_unhealthy
        self._tasks: dict[str, list[asyncio.Task[None]]] = {}

    def start(self, r: ContainerRecord, config: ContainerConfig) -> None:
        """Probe running container `r`, its probes run with `config` (its exec config)."""
        started = asyncio.Event()
        if not r.spec.get(STARTUP):
            r.started = True
            started.set()
            if not r.spec.get(READINESS) and r.kind in (APP, SIDECAR):
                r.ready = True  # LC7: no readiness probe means Success once started
        handle = r.handle

        async def run(probe: dict[str, Any], timeout: float) -> HandlerResult:
            return await run_handler(probe, container=r.spec, runtime=self._runtime,
                                     handle=handle, config=config, timeout=timeout)

        tasks = []
        for kind in (STARTUP, LIVENESS, READINESS):
            if r.spec.get(kind):
                worker = ProbeWorker(record=r, kind=kind, run=run,
                                     on_change=self._on_change,
                                     on_failure=self._on_failure,
                                     on_unhealthy=self._on_unhealthy, started=started,
                                     clock=self._clock)
                tasks.append(asyncio.create_task(worker.run(), name=f"probe:{r.name}:{kind}"))
        self._tasks[r.name] = tasks

    def stop(self, r: ContainerRecord, *, keep_readiness: bool = False) -> None:
        """Stop `r`'s probes; GT12: a terminating pod's readiness probes keep running."""
        for t in self._tasks.get(r.name, []):
            if keep_readiness and t.get_name().endswith(READINESS):
                continue
            t.cancel()

    def stop_all(self) -> None:
        for tasks in self._tasks.values():
            for t in tasks:
                t.cancel()
