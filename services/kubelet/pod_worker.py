"""One pod worker per pod: it starts, supervises, terminates and finally removes its pod.

Like Kubernetes' pod workers, each pod's updates are handled by its own task, in order:
run (init containers one at a time, sidecars, app containers, restarts with CrashLoopBackOff
per LC3, probes, hooks) until termination is requested (a deletionTimestamp, eviction, or
the object vanishing), then terminate (GT4–GT9), then finish (GT10/PS1: the terminal phase
is written and, only once every process is confirmed gone, the pod is deleted with period
0). Status is written by a companion task so it stays current during termination (GT12).
Cancelling a worker (kubelet shutdown) leaves the pod's processes running on purpose.

The worker is the state machine only: what to do next and when. How each step is done is
its helpers': the claims and sandbox steps (`pod_volumes`, `pod_sandbox`, which asks the
runtime for CRI's RunPodSandbox), container configs (`container_config`), starting,
adopting and recording exits (`container_lifecycle`), probes (`probe_manager`), kills
(`killing`), the status and the final delete (`pod_status`), Events (`pod_events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Coroutine
from typing import Any

from skiff.api.errors import ApiError
from skiff.api.types import Obj
from skiff.client import NORMAL, WARNING
from skiff.clock import rfc3339
from skiff.kubelet.admission import Rejection
from skiff.kubelet.configsources import (
    ConfigError,
    VolumeError,
    config_volumes,
)
from skiff.kubelet.container_config import ContainerConfigs
from skiff.kubelet.container_lifecycle import ContainerLifecycle
from skiff.kubelet.killing import (
    ContainerKiller,
    PodKill,
    TerminationOrdering,
    kill_leftovers,
)
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_events import PodEvents
from skiff.kubelet.pod_sandbox import PodSandboxStep
from skiff.kubelet.pod_status import (
    Eviction,
    PodStatusWriter,
    generate_pod_status,
    resource_version,
)
from skiff.kubelet.pod_volumes import (
    ClaimsStep,
    project_volumes,
    refresh_config_volumes_forever,
    tear_down_empty_dirs,
)
from skiff.kubelet.poddir import PodDir
from skiff.kubelet.probe_manager import ProbeManager
from skiff.kubelet.records import (
    APP,
    EPHEMERAL,
    INIT,
    SIDECAR,
    ContainerRecord,
    ephemeral_records,
    load_state,
    pod_records,
    save_state,
)
from skiff.kubelet.runtime import ContainerConfig
from skiff.kubelet.sandbox import Sandbox
from skiff.kubelet.termination import (
    KillReason,
    active_deadline_remaining,
    effective_grace_period,
)
from skiff.tracing import start_span_from_object

__all__ = ["PodWorker"]

log = logging.getLogger(__name__)

_CLAIM_RETRY_SECONDS = 2.0  # a missing claim is looked up again this often
_LOST_VOLUME_GRACE_SECONDS = 1  # a pod whose storage was taken away stops at once
# Kubernetes' pod workers kill pods found only in the runtime (no spec known) with 1 s.
_ORPHAN_GRACE_SECONDS = 1
_DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"


class PodWorker:
    """One pod's worker (`run` is its task); `update`, `removed`, `evict` and
    `volumes_changed` are its inputs, from the kubelet."""

    def __init__(self, *, env: PodEnvironment, pod: Obj,
                 rejection: Rejection | None = None) -> None:
        self.env = env
        self.rejection = rejection  # refused by admission: never started, Failed
        self.pod = copy.deepcopy(pod)
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta.get("namespace", "default")
        self.name: str = meta["name"]
        self.dir = PodDir(env.root_dir, self.uid, tmpfs=env.mount_volumes)
        spec = pod.get("spec", {})
        self.records: list[ContainerRecord] = pod_records(spec)
        self._wake = asyncio.Event()
        self._status_dirty = asyncio.Event()
        self._removed = False
        self._orphan = False
        self._eviction: tuple[int | None, str] | None = None
        self._eviction_reason = "Evicted"
        self.volumes = env.volumes.for_pod(pod)
        self._evicted = asyncio.get_running_loop().create_future()
        self._terminal = False
        self._init_failed = False
        self._phase = str(pod.get("status", {}).get("phase") or "Pending")
        self._start_time = pod.get("status", {}).get("startTime")
        self._background: set[asyncio.Task[Any]] = set()
        self._events = PodEvents(recorder=env.recorder, uid=self.uid)
        self._status = PodStatusWriter(api=env.api, uid=self.uid, namespace=self.namespace,
                                       name=self.name, pod=lambda: self.pod,
                                       compute=self.compute_status,
                                       written=self._status_written)
        self._claims = ClaimsStep(
            env=env, pod_dir=self.dir, claims=self.volumes,
            pod_name=f"{self.namespace}/{self.name}", event=self._event,
            changed=self._status_dirty.set,
            retry=lambda: self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS))
        self._sandbox = PodSandboxStep(env=env, pod_dir=self.dir, pod=lambda: self.pod,
                                       event=self._event, changed=self._status_dirty.set)
        self._configs = ContainerConfigs(env=env, pod_dir=self.dir, uid=self.uid,
                                         namespace=self.namespace, name=self.name,
                                         event=self._event)
        self._probes = ProbeManager(runtime=env.runtime, clock=env.clock,
                                    on_change=self._on_probe_change,
                                    on_failure=self._on_probe_failure,
                                    # Kubernetes' prober: Unhealthy for every failed probe
                                    on_unhealthy=lambda _r, message: self._event(
                                        WARNING, "Unhealthy", message))
        self._killer = ContainerKiller(runtime=env.runtime, uid=self.uid, pod=lambda: self.pod,
                                       exec_config=self.exec_config, event=self._event,
                                       keep=self._keep)
        self._containers = ContainerLifecycle(
            env=env, configs=self._configs, probes=self._probes, pod=lambda: self.pod,
            event=self._event, changed=self._status_dirty.set, exited=self._on_exit,
            save=self._save, kill=self._killer.kill)
        self._timer: asyncio.TimerHandle | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def sandbox(self) -> Sandbox | None:
        """The pod's sandbox (SB1); None while it has none or when it shares the node."""
        return self._configs.sandbox

    # -- inputs ----------------------------------------------------------------------------

    def update(self, pod: Obj) -> None:
        """A newer version of the pod from the informer."""
        if pod["metadata"].get("uid") != self.uid or resource_version(pod) < resource_version(
                self.pod):
            return
        self.pod = copy.deepcopy(pod)
        self._restart_redefined()
        # `kubectl debug`: ephemeral containers added through the pods/ephemeralcontainers
        # subresource start at the next sync
        self.records += ephemeral_records(self.pod.get("spec") or {}, self.records)
        self._wake.set()
        self._status_dirty.set()

    def _restart_redefined(self) -> None:
        """A container whose image the update changed (`kubectl set image pod/x`, the one
        container field a pod update may change) is restarted with the new one, as the
        kubelet does for a changed container hash: Killing "Container c definition changed,
        will be restarted", whatever the restartPolicy, without CrashLoopBackOff."""
        spec = self.pod.get("spec") or {}
        wanted = {str(c.get("name")): c for key in ("initContainers", "containers")
                  for c in spec.get(key) or [] if isinstance(c, dict)}
        for r in self.records:
            new = wanted.get(r.name)
            if new is None or new.get("image") == r.spec.get("image"):
                continue
            r.spec = copy.deepcopy(new)
            if not r.running or r.killing or self.terminating:
                continue
            self._event(NORMAL, "Killing",
                        f"Container {r.name} definition changed, will be restarted")
            r.redefined = True
            self.env.backoff.reset((self.uid, r.name))
            self._spawn(self._killer.kill(r, KillReason.DEFINITION_CHANGED))

    def removed(self, *, orphan: bool = False) -> None:
        """The pod object is gone from the API (force deleted, or deleted by us).

        `orphan`: only the pod's processes are known (found at start-up with no pod in the
        API); Kubernetes kills such runtime-only pods with a 1 s period and no hooks.
        """
        self._removed = True
        self._orphan = self._orphan or orphan
        self._wake.set()

    def evict(self, *, override: int, message: str) -> asyncio.Future[None]:
        """Kill the pod for node pressure (GT11); resolves once its processes are gone."""
        if self._eviction is None:
            self._eviction = (override, message)
        self._wake.set()
        return self._evicted

    @property
    def uses_claims(self) -> bool:
        return bool(self.volumes.claims)

    def volumes_changed(self) -> None:
        """A VolumeAttachment changed: re-check this pod's volumes (SC1)."""
        self._wake.set()

    @property
    def terminating(self) -> bool:
        return self._removed or self._eviction is not None or bool(
            self.pod["metadata"].get("deletionTimestamp"))

    @property
    def removed_from_api(self) -> bool:
        return self._removed

    @property
    def orphan(self) -> bool:
        return self._orphan

    @property
    def active(self) -> bool:
        return any(r.running for r in self.records)

    @property
    def holds_resources(self) -> bool:
        """Admitted and not terminal: its requests count against the node's allocatable
        for the admission of the next pod."""
        return self.rejection is None and not self._terminal and self._phase not in (
            "Succeeded", "Failed")

    # -- the worker ------------------------------------------------------------------------

    async def run(self) -> None:
        status_task = asyncio.create_task(self._status.run(self._status_dirty),
                                          name=f"status:{self.uid}")
        if config_volumes(self.pod):
            self._background.add(asyncio.create_task(
                refresh_config_volumes_forever(lambda: self.pod, self.dir, env=self.env),
                name=f"config-volumes:{self.uid}"))
        try:
            if self.rejection is not None:
                await self._reject(self.rejection)
                return
            self.dir.prepare(self.pod)
            refresher = await project_volumes(self.pod, self.dir, env=self.env,
                                              event=self._event)
            if refresher is not None:
                self._keep(refresher)
            self._adopt()
            if self._start_time is None:
                self._start_time = rfc3339(self.env.clock.now())
            if self._phase not in ("Succeeded", "Failed") or self.active:
                await self._run_until_terminating()
            if self.terminating:
                await self._terminate()
            await self._finish()
        finally:
            self._probes.stop_all()
            for t in self._background:
                t.cancel()
            for timer in (self._timer, self._deadline_timer):
                if timer is not None:
                    timer.cancel()
            status_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await status_task
            await self._events.flush()

    async def _run_until_terminating(self) -> None:
        first = True
        while not self.terminating:
            self._wake.clear()
            if self._active_deadline_exceeded():
                return
            if first:
                with start_span_from_object(self.env.tracer, "kubelet.start_pod", self.pod,
                                            attributes={"pod": f"{self.namespace}/{self.name}",
                                                        "node": self.env.node_name}):
                    done = await self._sync()
                first = False
            else:
                done = await self._sync()
            self._status_dirty.set()
            if done:
                return
            await self._wake.wait()

    # -- running ---------------------------------------------------------------------------

    async def _sync(self) -> bool:
        """Start what should run now; True when the pod has completed (nothing restarts)."""
        if not await self._sandbox_ready():
            return False
        if self.uses_claims and not await self._volumes_ready():
            return False
        policy = str(self.pod["spec"].get("restartPolicy", "Always"))
        for r in self.records:  # whether or not the pod has initialized, as kuberuntime
            if r.kind == EPHEMERAL and not r.has_run() and not r.running:
                await self._start_container(r)
        for r in self.records:
            if r.kind == SIDECAR:
                if not r.running and not r.killing:
                    await self._maybe_start(r)
                if not r.started and r.restart_count == 0:
                    return False  # LC4: the next init container waits for this sidecar
            elif r.kind == INIT:
                if r.succeeded:
                    continue
                if r.running or r.killing:
                    return False
                if r.has_run() and policy == "Never":
                    self._init_failed = True
                    return True
                await self._maybe_start(r)
                return False
        apps = [r for r in self.records if r.kind == APP]
        for r in apps:
            if r.running or r.killing or self.terminating:
                continue
            if not r.has_run() or r.should_restart(policy):
                await self._maybe_start(r)
        return not any(r.running or r.killing or r.should_restart(policy)
                       or not r.has_run() for r in apps)

    async def _volumes_ready(self) -> bool:
        """SC1 (pod_volumes.ClaimsStep); a pod whose volume is taken away while it runs is
        killed at once (it lost its storage)."""
        ready, lost = await self._claims.ensure(self.records, active=self.active)
        if lost is not None:
            self._eviction_reason = "VolumeDetached"
            self.evict(override=_LOST_VOLUME_GRACE_SECONDS, message=lost)
        return ready

    async def _sandbox_ready(self) -> bool:
        """SB1: the pod's sandbox exists before any of its containers starts (pod_sandbox)."""
        if not await self._sandbox.ensure(self.records):
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return False
        self._configs.sandbox = self._sandbox.sandbox
        return True

    async def _maybe_start(self, r: ContainerRecord) -> None:
        """Start `r` now, or wait out its CrashLoopBackOff (LC3)."""
        if r.has_run():
            if r.state.get("terminated"):
                # LC2: the crash is published as state.terminated before anything replaces
                # it (kubectl shows Error/Completed, then CrashLoopBackOff).
                await self._status.write()
                if self.terminating:
                    return  # termination was requested meanwhile: nothing starts
            restart_at = self._containers.back_off(r)
            if restart_at is not None:
                self._status_dirty.set()
                self._wake_at(restart_at)
                return
        await self._start_container(r)

    def _wake_at(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, when - self.env.clock.now())
        self._timer = asyncio.get_running_loop().call_later(delay, self._wake.set)

    def exec_config(self, r: ContainerRecord) -> ContainerConfig:
        """What pods/exec runs a command with in container `r` (SB4), in its cgroup."""
        return self._configs.in_cgroup(self.pod, r, self._configs.build(self.pod, r))

    async def _start_container(self, r: ContainerRecord) -> None:
        """Create and start `r`'s next attempt, once what it reads exists (ConfigMaps,
        Secrets: else CreateContainerConfigError, or ContainerCreating with FailedMount
        for a volume) and the kubelet does not refuse it (container_config)."""
        r.retire_termination()
        try:
            await self._configs.resolve_sources(self.pod, r)
        except VolumeError as err:  # the volume waits, the container is not created yet
            self._wait_to_create(r, {"reason": "ContainerCreating"}, "FailedMount", str(err))
            return
        except (ConfigError, ApiError) as err:
            message = str(err) if isinstance(err, ConfigError) else err.message
            self._wait_to_create(r, {"reason": "CreateContainerConfigError",
                                     "message": message}, "Failed", f"Error: {message}")
            return
        refused = self._configs.refused(self.pod, r)
        if refused is not None:
            self._wait_to_create(r, {"reason": "CreateContainerConfigError",
                                     "message": refused}, "Failed", f"Error: {refused}")
            return
        self._configs.prepare(self.pod, r)
        if not await self._containers.start(r):
            self._wake.set()  # StartError: counted as an attempt, restarted with back-off

    def _wait_to_create(self, r: ContainerRecord, waiting: Obj, reason: str,
                        message: str) -> None:
        """`r` waits (a Warning event says why) and its creation is tried again soon."""
        r.state = {"waiting": waiting}
        self._event(WARNING, reason, message)
        self._status_dirty.set()
        self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)

    def _on_probe_change(self) -> None:
        self._status_dirty.set()
        self._wake.set()

    def _on_probe_failure(self, r: ContainerRecord, reason: KillReason, message: str) -> None:
        """A liveness or startup probe reached its failureThreshold (its Unhealthy Events
        are already out): Killing, then the kill with the probe's grace period (GT4)."""
        if self.terminating or r.killing or not r.running:
            return
        log.info("container failed its probe; restarting it", extra={
            "pod": f"{self.namespace}/{self.name}", "container": r.name, "detail": message})
        what = "liveness" if reason is KillReason.LIVENESS_PROBE else "startup"
        self._event(NORMAL, "Killing",
                    f"Container {r.name} failed {what} probe, will be restarted")
        self._spawn(self._killer.kill(r, reason))

    # -- killing ---------------------------------------------------------------------------

    def _kill_reason(self) -> tuple[KillReason, bool]:
        """Why the pod's containers are killed, and whether preStop hooks are skipped."""
        if self._orphan:
            return KillReason.ORPHANED, True
        if self._eviction is not None:
            return KillReason.EVICTION, False
        return KillReason.POD_TERMINATION, False

    def _effective_grace_period(self, *, current: int) -> int:
        """GT7 for this pod now. A force-deleted pod's last known object carries no usable
        period (0 counts as none), so, as Kubernetes 1.32's kubelet does, its spec's
        terminationGracePeriodSeconds applies and preStop runs; a pod found only on disk
        (no spec) gets 1 s."""
        if self._orphan:
            return _ORPHAN_GRACE_SECONDS
        override = self._eviction[0] if self._eviction is not None else None
        return effective_grace_period(self.pod, current=current, override=override)

    async def _terminate(self) -> None:
        """Stop every container of the pod (GT4–GT9) with the pod-level period (GT7), or
        a shorter one arriving meanwhile (killing.PodKill)."""
        reason, skip = self._kill_reason()
        for r in self.records:
            self._probes.stop(r, keep_readiness=True)  # GT12: readiness keeps running
        if not self.active:
            return
        period = self._effective_grace_period(current=0)
        pod_name = f"{self.namespace}/{self.name}"
        if self._removed:
            log.warning("pod was deleted from the API while its processes run; killing them",
                        extra={"pod": pod_name, "uid": self.uid, "gracePeriod": period})
            self._event(WARNING, "Killing", "Pod was deleted from the API while its "
                        "containers were running (force deletion); stopping them (grace "
                        f"period {period}s)")
        elif reason is KillReason.POD_TERMINATION:  # one event per container, as the kubelet
            for r in self.records:
                if r.running:
                    self._event(NORMAL, "Killing", f"Stopping container {r.name}")
        with start_span_from_object(self.env.tracer, "kubelet.kill_pod", self.pod,
                                    attributes={"pod": pod_name, "reason": reason.value}):
            await PodKill(killer=self._killer, records=self.records,
                          period=lambda current: self._effective_grace_period(current=current),
                          updated=self._wake, event=self._event,
                          pod_name=pod_name).run(reason, skip_pre_stop=skip, period=period)

    def _active_deadline_exceeded(self) -> bool:
        """`activeDeadlineSeconds` (Kubernetes' activeDeadlineHandler): once the pod has
        been active that long since its startTime, it fails with reason DeadlineExceeded
        and its containers are killed with its grace period. Before then, wake at the
        deadline (the field may be shortened by an update)."""
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        remaining = active_deadline_remaining(self.pod, self._start_time,
                                              now=self.env.clock.now())
        if remaining is None:
            return False
        if remaining > 0:
            self._deadline_timer = asyncio.get_running_loop().call_later(
                remaining, self._wake.set)
            return False
        log.info("pod exceeded its active deadline; failing it",
                 extra={"pod": f"{self.namespace}/{self.name}",
                        "deadline": self.pod["spec"].get("activeDeadlineSeconds")})
        self._eviction_reason = "DeadlineExceeded"
        self._eviction = (None, _DEADLINE_EXCEEDED_MESSAGE)
        self._status_dirty.set()
        return True

    async def _finish(self) -> None:
        """GT10 + PS1: terminal phase, then (if deleted) delete with period 0 once every
        process is confirmed gone; then wait for the object to go and clean up."""
        if not self.terminating:
            # Completed on its own (restartPolicy Never/OnFailure): stop the sidecars.
            ordering = TerminationOrdering(self.records)
            await asyncio.gather(*(self._killer.kill(r, KillReason.POD_TERMINATION,
                                                     ordering=ordering)
                                   for r in self.records if r.running))
        await kill_leftovers(self.records, self.env.runtime)
        await self._sandbox.remove(self.uid)
        await asyncio.to_thread(tear_down_empty_dirs, self.pod, self.dir)
        await self._terminal_until_removed()
        self.dir.remove()

    async def _reject(self, rejection: Rejection) -> None:
        """Kubernetes' rejectPod: a Warning Event and the Failed phase; no process, no
        sandbox, no directory. Deleting it then needs no grace (nothing runs)."""
        self._event(WARNING, rejection.reason, rejection.message)
        await self._terminal_until_removed()

    async def _terminal_until_removed(self) -> None:
        """Write the terminal status, then finish a deletion with period 0 (GT10)."""
        self._terminal = True
        if not self._evicted.done():
            self._evicted.set_result(None)
        await self._status.write()
        while not self._removed:
            if self.pod["metadata"].get("deletionTimestamp"):
                self._removed = await self._status.delete() or self._removed
            self._wake.clear()
            if self._removed:
                break
            await self._wake.wait()

    # -- status ----------------------------------------------------------------------------

    def compute_status(self, pod: Obj) -> Obj:
        eviction = None if self._eviction is None else Eviction(
            reason=self._eviction_reason, message=self._eviction[1])
        status = generate_pod_status(
            pod, records=self.records, rejection=self.rejection, phase_seen=self._phase,
            terminal=self._terminal, init_failed=self._init_failed, eviction=eviction,
            start_time=self._start_time,
            pod_ip=self.sandbox.ip if self.sandbox is not None else None,
            now=self.env.clock.now())
        self._phase = str(status["phase"])
        return status

    def _status_written(self, pod: Obj) -> None:
        if resource_version(pod) > resource_version(self.pod):
            self.pod = pod

    # -- helpers ---------------------------------------------------------------------------

    def _adopt(self) -> None:
        """GT8: re-attach to the processes an earlier kubelet started for this pod."""
        state = load_state(self.dir.path)
        if state and state.get("uid") == self.uid:
            self._containers.adopt(self.records, state.get("containers") or {},
                                   deleting=self.terminating)

    def _save(self) -> None:
        try:
            save_state(self.dir.path, pod=self.pod, records=self.records)
        except OSError as err:
            log.warning("could not save pod state", extra={"uid": self.uid, "error": str(err)})

    def _event(self, type_: str, reason: str, message: str) -> None:
        """Record an Event on the pod, after the ones recorded before it (pod_events)."""
        self._events.record(self.pod, type_, reason, message)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._keep(asyncio.create_task(coro, name=f"pod-worker:{self.uid}"))

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """A task of the pod's that runs on its own (cancelled when the worker ends)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_exit(self) -> None:
        """A container exited (its record says how): save, report, and sync."""
        self._save()
        self._status_dirty.set()
        self._wake.set()

