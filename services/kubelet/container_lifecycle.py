"""One pod's containers from start to exit, as kuberuntime's startContainer does it (LC1–LC3, AU8).

`ContainerLifecycle.start` takes a container whose config the pod worker has resolved
through its attempt: the runtime's start, in a fresh cgroup with the container's limits
(AU8; an OSError is the attempt's StartError), Created and Started events, the
postStart hook (a failing one kills the container, FailedPostStartHook), then its probes.
`back_off` keeps a crashed container waiting out its CrashLoopBackOff (LC3); `adopt`
re-attaches to the containers an earlier kubelet started (GT8); every exit is
recorded as `state.terminated` with its reason (Completed, Error, OOMKilled,
ContainerStatusUnknown) and termination message. When to start or restart a container is
the pod worker's; how is here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal as signals
from collections.abc import Awaitable, Callable
from typing import Any

from skiff.api.types import Obj
from skiff.client import NORMAL, WARNING
from skiff.clock import rfc3339
from skiff.kubelet.container_config import ContainerConfigs
from skiff.kubelet.handlers import run_handler
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_events import EventSink
from skiff.kubelet.probe_manager import ProbeManager
from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.runtime import ContainerHandle, ContainerResources
from skiff.kubelet.termination import KillReason
from skiff.kubelet.unknownstatus import count_restart, mark_lost

__all__ = ["ContainerLifecycle"]

log = logging.getLogger(__name__)

_POST_START_TIMEOUT_SECONDS = 30.0  # hooks have no timeout field; bound a hanging one


class ContainerLifecycle:
    """`pod()`: the pod as its worker knows it now; `changed()`: the status is stale;
    `exited()`: a container exited (its record says how); `save()`: persist the records
    (GT8); `kill(r, reason)`: stop a container (killing.ContainerKiller)."""

    def __init__(self, *, env: PodEnvironment, configs: ContainerConfigs,
                 probes: ProbeManager, pod: Callable[[], Obj], event: EventSink,
                 changed: Callable[[], None], exited: Callable[[], None],
                 save: Callable[[], None],
                 kill: Callable[[ContainerRecord, KillReason], Awaitable[None]]) -> None:
        self.env = env
        self._configs = configs
        self._probes = probes
        self._pod = pod
        self._event = event
        self._changed = changed
        self._exited = exited
        self._save = save
        self._kill = kill

    async def start(self, r: ContainerRecord) -> bool:
        """Start `r`'s next attempt; False when it could not start (StartError)."""
        pod = self._pod()
        # AU8: the runtime starts the attempt in a fresh cgroup with these limits
        config = dataclasses.replace(self._configs.build(pod, r),
                                     resources=ContainerResources(pod=pod, container=r.spec))
        r.image = config.image
        try:
            handle = await self.env.runtime.start(config)
        except OSError as err:
            now = self.env.clock.now()
            r.attempts += 1
            r.exit_code, r.finished_at = 128, now
            r.state = {"terminated": {"exitCode": 128, "reason": "StartError",
                                      "message": str(err), "startedAt": rfc3339(now),
                                      "finishedAt": rfc3339(now)}}
            self._event(WARNING, "Failed", f"Error: {err}")
            return False
        r.handle = handle
        r.redefined = False
        r.attempts += 1
        r.exit_code = r.finished_at = None
        r.started = r.ready = r.post_start_done = False
        r.state = {"waiting": {"reason": "ContainerCreating"}}
        handle.exited.add_done_callback(self._exit_callback(r, handle))
        self._save()
        self._changed()
        self._event(NORMAL, "Created", f"Created container: {r.name}")
        self._event(NORMAL, "Started", f"Started container {r.name}")
        post_start = (r.spec.get("lifecycle") or {}).get("postStart")
        if post_start:
            result = await run_handler(post_start, container=r.spec, runtime=self.env.runtime,
                                       handle=handle, config=config,
                                       timeout=_POST_START_TIMEOUT_SECONDS)
            if not result.success and handle.running:
                self._event(WARNING, "FailedPostStartHook", result.message)
                await self._kill(r, KillReason.FAILED_POST_START_HOOK)
                return True
        if not handle.running:
            return True
        r.post_start_done = True
        r.state = {"running": {"startedAt": rfc3339(handle.started_at)}}
        self._start_probes(r)
        self._changed()
        return True

    def back_off(self, r: ContainerRecord) -> float | None:
        """LC3, kuberuntime's doBackOff: None when exited container `r` may restart now
        (its restart is counted), else when it may (CrashLoopBackOff until then; every
        sync that declines to restart it says so with a BackOff event)."""
        meta = self._pod()["metadata"]
        key = (str(meta["uid"]), r.name)
        finished = r.finished_at if r.finished_at is not None else self.env.clock.now()
        if not self.env.backoff.in_backoff_since(key, finished):
            self.env.backoff.next(key)
            count_restart(r)
            return None
        delay = self.env.backoff.get(key)
        pod = f"{meta['name']}_{meta.get('namespace', 'default')}({meta['uid']})"
        self._event(WARNING, "BackOff",
                    f"Back-off restarting failed container {r.name} in pod {pod}")
        r.retire_termination()
        r.state = {"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {delay:g}s restarting failed container={r.name} "
                       f"pod={pod}"}}
        return finished + delay

    def _start_probes(self, r: ContainerRecord) -> None:
        pod = self._pod()
        self._probes.start(r, self._configs.in_cgroup(pod, r, self._configs.build(pod, r)))

    def adopt(self, records: list[ContainerRecord], saved: dict[str, Any], *,
              deleting: bool) -> None:
        """GT8: re-attach to the processes an earlier kubelet started (`saved`: the
        containers of the pod's saved state, records.load_state)."""
        pod = self._pod()
        for r in records:
            entry = saved.get(r.name)
            if not entry:
                continue
            r.restart_count = int(entry.get("restartCount") or 0)
            r.attempts = int(entry.get("attempts") or 0)
            r.last_state = entry.get("lastState") or {}
            r.exit_code = entry.get("exitCode")
            r.finished_at = self.env.clock.now() if r.attempts else None
            r.state = entry.get("state") or r.state
            r.restart_counted = bool(entry.get("restartCounted"))
            handle = None
            if entry.get("running") and entry.get("pid"):
                handle = self.env.runtime.adopt(
                    pid=int(entry["pid"]), pgid=int(entry["pgid"]),
                    start_ticks=int(entry["startTicks"]), started_at=float(entry["startedAt"]))
                if handle is None:  # gone (a crash, a power cycle): never "Running"
                    mark_lost(r, now=self.env.clock.now(), deleting=deleting,
                              has_init_containers=bool(pod["spec"].get("initContainers")))
                    self._changed()
            if handle is not None:
                meta = pod["metadata"]
                log.info("re-adopted a running container", extra={
                    "pod": f"{meta.get('namespace', 'default')}/{meta['name']}",
                    "container": r.name, "pid": handle.pid})
                r.handle = handle
                r.exit_code = None
                r.post_start_done = True
                r.state = {"running": {"startedAt": rfc3339(handle.started_at)}}
                handle.exited.add_done_callback(self._exit_callback(r, handle))
                self._start_probes(r)

    def _exit_callback(self, r: ContainerRecord,
                       handle: ContainerHandle) -> Callable[[asyncio.Future[int | None]], None]:
        return lambda _future: self._on_exit(r, handle)

    def _on_exit(self, r: ContainerRecord, handle: ContainerHandle) -> None:
        code: int | None = handle.exited.result()
        reason = "Completed"
        if code is None:  # re-adopted process: its exit status cannot be known
            if handle.signals_sent:
                code = 128 + handle.signals_sent[-1]
                reason = "Error"
            else:
                code, reason = 137, "ContainerStatusUnknown"
        elif code != 0:
            reason = "Error"
        if self._oom_killed(r, code, handle):
            reason = "OOMKilled"
        now = self.env.clock.now()
        r.exit_code, r.finished_at = code, now
        r.ready = r.started = False
        r.state = {"terminated": {"exitCode": code, "reason": reason,
                                  "startedAt": rfc3339(handle.started_at),
                                  "finishedAt": rfc3339(now), "containerID": handle.id}}
        message = self._configs.termination_message(r, code, reason)
        if message:
            r.state["terminated"]["message"] = message
        self._probes.stop(r)
        self._exited()

    def _oom_killed(self, r: ContainerRecord, code: int, handle: ContainerHandle) -> bool:
        """AU8: the kernel's OOM killer ended this attempt: as the runtime saw it, or for a
        re-adopted container (the runtime did not make its cgroup) its cgroup's counter."""
        if handle.oom_killed is not None:
            return handle.oom_killed
        if self.env.cgroups is None:
            return False
        cgroup = self.env.cgroups.container(self._pod(), r.name)
        return cgroup.oom_killed(exit_code=code,
                                 kubelet_killed=signals.SIGKILL in handle.signals_sent)
