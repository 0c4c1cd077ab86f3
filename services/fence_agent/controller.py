"""The fence agent's state machine over Fence objects (SPEC FN1–FN3).

A Fence moves Pending → Fencing → Fenced | Failed, and, once a user deletes it (unfence),
Unfencing → gone. The fencing controller in controller-manager creates the Fence with the
finalizer `skiff.io/fence-agent` and acts only on `Fenced`; this service is the only writer
of the Fence's status and the only remover of that finalizer, so the object cannot vanish
before the node was given back.

Controller recipe: informer handlers enqueue the Fence's name; workers reconcile one name at
a time from a fresh GET (fencing acts on the real world, so it never acts on a stale cache),
requeueing with backoff on errors. A Fence left in `Fencing` (this service crashed
mid-fence) is fenced again: agents are idempotent. A resync re-checks every Fenced node and
fences it again if something of it came back (keep-down).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.api.wellknown import FENCE_FINALIZER as FINALIZER
from skiff.client import NORMAL, WARNING, Client, EventRecorder, Informer
from skiff.client.worker import run_worker
from skiff.client.workqueue import WorkQueue
from skiff.clock import Clock, rfc3339
from skiff.fence_agent.agent import FenceAgent, FenceError

__all__ = ["FINALIZER", "FenceController"]

log = logging.getLogger(__name__)


PENDING, FENCING, FENCED, FAILED, UNFENCING = (
    "Pending", "Fencing", "Fenced", "Failed", "Unfencing")


class FenceController:
    def __init__(self, *, api: Client, agents: Mapping[str, FenceAgent],
                 recorder: EventRecorder, clock: Clock, resync_period: float = 5.0,
                 workers: int = 4) -> None:
        self.api = api
        self.agents = dict(agents)
        self.recorder = recorder
        self.clock = clock
        self.resync_period = resync_period
        self.workers = workers
        self.queue: WorkQueue[str] = WorkQueue(name="fences", base_delay=0.2, max_delay=30.0,
                                               clock=clock)
        self._events: set[asyncio.Task[None]] = set()
        self.informer = Informer(api, "fences", resync_period=resync_period)
        self.informer.add_handler(on_add=self._enqueue,
                                  on_update=lambda _old, new: self._enqueue(new))

    def _enqueue(self, fence: Obj) -> None:
        self.queue.add(str(fence["metadata"]["name"]))

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informer.run(), name="fence-informer")
                await self.informer.wait_synced()
                for i in range(self.workers):
                    tg.create_task(self._worker(), name=f"fence-worker-{i}")
        finally:
            self.queue.shutdown()
            await self._flush_events()

    async def _flush_events(self, timeout: float = 5.0) -> None:
        """Let the Events still being written reach the apiserver before shutdown ends
        (bounded, so a lost apiserver cannot hold shutdown up); cancel what is left."""
        if self._events:
            _, pending = await asyncio.wait(set(self._events), timeout=timeout)
            for task in pending:
                task.cancel()

    async def wait_synced(self) -> None:
        await self.informer.wait_synced()

    async def _worker(self) -> None:
        await run_worker(self.queue, self.reconcile, on_error=self._retrying)

    def _retrying(self, name: str, err: Exception) -> None:
        if isinstance(err, ApiError | FenceError):
            log.warning("reconciling fence failed; retrying", extra={
                "fence": name, "error": getattr(err, "message", str(err))})
        else:
            log.error("reconciling fence failed", extra={"fence": name}, exc_info=err)

    # -- one Fence -------------------------------------------------------------------------

    async def reconcile(self, name: str) -> None:
        try:
            fence = await self.api.get("fences", name)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return
            raise
        meta = fence["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                await self._unfence(fence)
            return
        if FINALIZER not in finalizers:
            body = copy.deepcopy(fence)
            body["metadata"]["finalizers"] = [*finalizers, FINALIZER]
            fence = await self.api.update(body)
        phase = str((fence.get("status") or {}).get("phase") or PENDING)
        if phase in (PENDING, FENCING):
            await self._fence(fence, phase)
        elif phase == FENCED:
            await self._keep_down(fence)

    def _agent(self, fence: Obj) -> tuple[str, FenceAgent | None]:
        name = str(fence.get("spec", {}).get("agent", ""))
        return name, self.agents.get(name)

    async def _fence(self, fence: Obj, phase: str) -> None:
        node = str(fence["spec"]["nodeName"])
        agent_name, agent = self._agent(fence)
        if agent is None:
            await self._set_status(fence, phase=FAILED, message=(
                f"no {agent_name!r} agent in this fence agent (it has "
                f"{', '.join(sorted(self.agents))}); delete the Fence and fence again with "
                "one of those"))
            return
        if phase == PENDING:
            fence = await self._set_status(fence, phase=FENCING,
                                           message=f"{agent_name} agent fencing {node}")
            self._event(fence, NORMAL, "Fencing", f"fencing node {node} with the {agent_name} "
                        f"agent: {fence['spec'].get('reason') or 'no reason given'}")
        try:
            done = await agent.fence(node)
            confirmed = await agent.status(node)
        except FenceError as err:
            await self._set_status(fence, phase=FAILED, message=str(err))
            self._event(fence, WARNING, "FenceFailed", f"fencing node {node} failed: {err}")
            return
        if not confirmed.fenced:
            message = f"{done}; but the check afterwards failed: {confirmed.message}"
            await self._set_status(fence, phase=FAILED, message=message)
            self._event(fence, WARNING, "FenceFailed", message)
            return
        await self._set_status(fence, phase=FENCED, message=f"{done}; {confirmed.message}",
                               confirmed=True)
        self._event(fence, NORMAL, "Fenced", f"node {node} fenced: {done}")
        log.info("node fenced", extra={"node": node, "agent": agent_name, "detail": done})

    async def _keep_down(self, fence: Obj) -> None:
        node = str(fence["spec"]["nodeName"])
        _name, agent = self._agent(fence)
        if agent is None:
            return
        status = await agent.status(node)
        if status.fenced:
            return
        log.warning("a fenced node came back; fencing it again",
                    extra={"node": node, "detail": status.message})
        self._event(fence, WARNING, "FenceBroken", f"fenced node {node} came back "
                    f"({status.message}); fencing it again")
        try:
            done = await agent.fence(node)
            again = await agent.status(node)
        except FenceError as err:
            await self._set_status(fence, phase=FAILED, message=f"node {node} came back and "
                                   f"could not be fenced again: {err}")
            return
        if not again.fenced:
            await self._set_status(fence, phase=FAILED, message=f"node {node} came back and "
                                   f"is still not fenced: {again.message}")
            return
        await self._set_status(fence, phase=FENCED, message=f"fenced again: {done}",
                               confirmed=True)

    async def _unfence(self, fence: Obj) -> None:
        node = str(fence["spec"]["nodeName"])
        agent_name, agent = self._agent(fence)
        if (fence.get("status") or {}).get("phase") != UNFENCING:
            fence = await self._set_status(fence, phase=UNFENCING,
                                           message=f"unfencing node {node}")
        message = f"no {agent_name!r} agent here; nothing to undo"
        if agent is not None:
            try:
                message = await agent.unfence(node)
            except FenceError as err:
                await self._set_status(fence, phase=UNFENCING, message=f"unfencing failed, "
                                       f"retrying: {err}")
                self._event(fence, WARNING, "UnfenceFailed", str(err))
                raise
        self._event(fence, NORMAL, "Unfenced", message)
        for _ in range(8):
            body = copy.deepcopy(fence)
            body["metadata"]["finalizers"] = [
                f for f in fence["metadata"].get("finalizers") or [] if f != FINALIZER]
            try:
                await self.api.update(body)
                break
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    break
                if err.reason != Reason.CONFLICT:
                    raise
                fence = await self.api.get("fences", fence["metadata"]["name"])
        log.info("node unfenced", extra={"node": node, "detail": message})

    async def _set_status(self, fence: Obj, *, phase: str, message: str,
                          confirmed: bool = False) -> Obj:
        """Write status.phase/message (and confirmedAt) on the latest version."""
        for _ in range(8):
            body = copy.deepcopy(fence)
            status = body.setdefault("status", {})
            status["phase"] = phase
            status["message"] = message
            if confirmed:
                status["confirmedAt"] = rfc3339(self.clock.now())
            try:
                return await self.api.update_status(body)
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
                fence = await self.api.get("fences", fence["metadata"]["name"])
        raise ApiError(Reason.CONFLICT, f"fence {fence['metadata']['name']}: status write "
                                        "kept conflicting")

    def _event(self, fence: Obj, type_: str, reason: str, message: str) -> None:
        task = asyncio.create_task(self.recorder.event(fence, type_, reason, message),
                                   name=f"event:{reason}:{fence['metadata']['name']}")
        self._events.add(task)
        task.add_done_callback(self._events.discard)
