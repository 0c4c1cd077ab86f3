"""The one recipe every controller here follows (DESIGN "Controllers", client-go style).

Informer handlers only enqueue `namespace/name` keys; `workers` tasks take a key from the
rate-limited `WorkQueue`, call `reconcile(key)` which works from the informer cache and is
idempotent, then `forget` the key on success or requeue it with rate limiting on error. A
reconcile may also ask to be called again after a delay (a toleration running out, a
quarantine ending). Periodic controllers set `resync_period` and get `resync()` called on it.
Stopping shuts the queue, lets in-flight reconciles finish for `drain_timeout`, then cancels.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from dataclasses import dataclass, field
from typing import ClassVar

from skiff.api import ApiError
from skiff.client import Client, EventRecorder
from skiff.client.worker import run_worker
from skiff.client.workqueue import WorkQueue
from skiff.clock import REAL_CLOCK, Clock
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.settings import ControllerManagerSettings
from skiff.tasks import cancel_tasks

log = logging.getLogger(__name__)


@dataclass
class ControllerContext:
    """What a controller is built from: the API, shared informers, settings, a clock."""

    client: Client
    informers: SharedInformers
    settings: ControllerManagerSettings
    clock: Clock = REAL_CLOCK
    host: str = ""
    _recorders: dict[str, EventRecorder] = field(default_factory=dict)

    def recorder(self, component: str) -> EventRecorder:
        """An event recorder whose `source.component` is Kubernetes' name for the controller."""
        rec = self._recorders.get(component)
        if rec is None:
            rec = self._recorders[component] = EventRecorder(
                self.client, component=component, host=self.host, clock=self.clock)
        return rec


class Controller(abc.ABC):
    """Base of every controller: subclass, register handlers in `__init__`, implement
    `reconcile`."""

    name: ClassVar[str]

    def __init__(self, *, context: ControllerContext, workers: int = 1,
                 resync_period: float | None = None, drain_timeout: float = 2.0) -> None:
        self.context = context
        self.client = context.client
        self.clock = context.clock
        self.workers = max(1, workers)
        self.resync_period = resync_period
        self.drain_timeout = drain_timeout
        self.queue: WorkQueue[str] = WorkQueue(name=self.name, clock=context.clock)

    @abc.abstractmethod
    async def reconcile(self, key: str) -> float | None:
        """Bring `key` to its desired state; return seconds after which to look again."""

    def resync(self) -> None:
        """Called every `resync_period`; periodic controllers enqueue their work here."""
        return None

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    async def run(self) -> None:
        """Work until cancelled; then drain in-flight reconciles and stop."""
        await self.context.informers.wait_synced()
        log.info("controller started", extra={"controller": self.name,
                                              "workers": self.workers})
        tasks = [asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                 for i in range(self.workers)]
        if self.resync_period:
            tasks.append(asyncio.create_task(self._resync_loop(self.resync_period),
                                             name=f"{self.name}-resync"))
        try:
            await asyncio.wait(tasks)
        finally:
            self.queue.shutdown()
            await asyncio.wait(tasks, timeout=self.drain_timeout)
            await cancel_tasks(*tasks)
            log.info("controller stopped", extra={"controller": self.name})

    async def _resync_loop(self, period: float) -> None:
        while not self.queue.shutting_down:
            self.resync()
            await self.clock.sleep(period)

    async def _worker(self) -> None:
        await run_worker(self.queue, self.reconcile, on_error=self._requeueing)

    def _requeueing(self, key: str, err: Exception) -> None:
        log.warning("reconcile failed; requeueing with backoff",
                    extra={"controller": self.name, "key": key, "error": str(err),
                           "requeues": self.queue.num_requeues(key)},
                    exc_info=not isinstance(err, ApiError))
