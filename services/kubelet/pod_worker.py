"""One pod worker per pod: it starts, supervises, terminates and finally removes its pod.

Like Kubernetes' pod workers, each pod's updates are handled by its own task, in order:
run (init containers one at a time, sidecars, app containers, restarts with CrashLoopBackOff
per LC3, probes, hooks) until termination is requested (a deletionTimestamp, eviction, or
the object vanishing), then terminate (GT4–GT9), then finish (GT10/PS1: the terminal phase
is written and, only once every process is confirmed gone, the pod is deleted with period
0). Status is written by a companion task so it stays current during termination (GT12).
Cancelling a worker (kubelet shutdown) leaves the pod's processes running on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
import pwd
import shutil
import signal as signals
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.trace import Tracer

from skiff.api.errors import ApiError, Reason
from skiff.client import NORMAL, WARNING, ApiClient, EventRecorder
from skiff.client.backoff import Backoff
from skiff.clock import Clock, parse_rfc3339, rfc3339
from skiff.kubelet.admission import Rejection
from skiff.kubelet.cgroups import CgroupManager, ContainerCgroup
from skiff.kubelet.configsources import (
    ConfigError,
    VolumeError,
    config_volumes,
    refresh_config_volumes,
    resolve_env,
)
from skiff.kubelet.dnsconfig import (
    MISSING_CLUSTER_DNS,
    ResolvConf,
    parse_resolv_conf,
    pod_resolv_conf,
)
from skiff.kubelet.handlers import POD_IP, run_handler
from skiff.kubelet.killing import TerminationOrdering, kill_container
from skiff.kubelet.poddir import PodDir, container_env, field_ref_value, write_downward_api
from skiff.kubelet.probes import LIVENESS, READINESS, STARTUP, ProbeWorker
from skiff.kubelet.projected import (
    has_projected_volumes,
    keep_projected_volumes,
    write_projected_volumes,
)
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
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle, ContainerRuntime
from skiff.kubelet.runtime.images import ImageCommands, container_command
from skiff.kubelet.runtime.process import STANDARD_PATH, signal_number
from skiff.kubelet.sandbox import (
    NO_POD_CIDR_MESSAGE,
    NOT_ISOLATED_MESSAGE,
    Sandbox,
    SandboxError,
    SandboxManager,
)
from skiff.kubelet.sandbox.landlock import plan_landlock
from skiff.kubelet.sandbox.mounts import (
    BindMount,
    SubPathError,
    etc_host_mounts,
    mount_memory_volumes,
    plan_mounts,
    unmount_memory_volumes,
)
from skiff.kubelet.sandbox.rootfs import RootView, system_entries
from skiff.kubelet.sandbox.security import (
    fs_group_volumes,
    open_empty_dirs,
    plan_security,
    run_as_non_root_error,
)
from skiff.kubelet.servicelinks import service_env
from skiff.kubelet.status import (
    container_status,
    merge_conditions,
    pod_phase,
    qos_class,
    ready_conditions,
)
from skiff.kubelet.termination import (
    PRESTOP_EXTENSION_SECONDS,
    KillReason,
    effective_grace_period,
    falls_back_to_logs,
    termination_message,
    termination_message_path,
)
from skiff.kubelet.unknownstatus import count_restart, mark_lost
from skiff.kubelet.volumes import VolumeManager
from skiff.tracing import start_span_from_object

__all__ = ["PodEnvironment", "PodWorker"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

_POST_START_TIMEOUT_SECONDS = 30.0  # hooks have no timeout field; bound a hanging one
_CLAIM_RETRY_SECONDS = 2.0  # a missing claim is looked up again this often
_LOST_VOLUME_GRACE_SECONDS = 1  # a pod whose storage was taken away stops at once
# Kubernetes' pod workers kill pods found only in the runtime (no spec known) with 1 s.
_ORPHAN_GRACE_SECONDS = 1
_DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"


@dataclass
class PodEnvironment:
    """What every pod worker of one node shares."""

    api: ApiClient
    recorder: EventRecorder
    runtime: ContainerRuntime
    root_dir: Path
    node_name: str
    backoff: Backoff[tuple[str, str]]
    clock: Clock
    tracer: Tracer
    base_env: dict[str, str]
    volumes: VolumeManager
    root_ca_file: str = ""  # SPEC AX3: the ca.crt of projected token volumes
    # Pod sandboxes (SPEC SB1); None: pods share the node's network, and are told so.
    sandboxes: SandboxManager | None = None
    image_commands: ImageCommands = field(default_factory=dict)
    config_volume_refresh_seconds: float = 2.0
    # Pod DNS (dnsconfig.py): --cluster-dns, --cluster-domain, --resolv-conf
    # the node's allocatable cpu/memory: a resourceFieldRef's value for an unset limit
    allocatable: dict[str, str] = field(default_factory=dict)
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    resolv_conf: str = "/etc/resolv.conf"
    # AU8: pod and container cgroups (limits, OOMKilled); None: not enforced on this node
    cgroups: CgroupManager | None = None


def _rv(obj: Obj) -> int:
    try:
        return int(obj.get("metadata", {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class PodWorker:
    def __init__(self, *, env: PodEnvironment, pod: Obj,
                 rejection: Rejection | None = None) -> None:
        self.env = env
        self.rejection = rejection  # refused by admission: never started, Failed
        self.pod = copy.deepcopy(pod)
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta.get("namespace", "default")
        self.name: str = meta["name"]
        self.dir = PodDir(env.root_dir, self.uid, tmpfs=env.sandboxes is not None)
        spec = pod.get("spec", {})
        self.records: list[ContainerRecord] = pod_records(spec)
        self._wake = asyncio.Event()
        self._status_dirty = asyncio.Event()
        self._removed = False
        self._orphan = False
        self._eviction: tuple[int | None, str] | None = None
        self._eviction_reason = "Evicted"
        self.volumes = env.volumes.for_pod(pod)
        self._volume_message: str | None = None
        self._evicted = asyncio.get_running_loop().create_future()
        self._terminal = False
        self._init_failed = False
        self._phase = str(pod.get("status", {}).get("phase") or "Pending")
        self._dns_reported = False  # MissingClusterDNS / DNSConfigForming said once
        self._last_written: Obj | None = None
        self._start_time = pod.get("status", {}).get("startTime")
        self._probes: dict[str, list[asyncio.Task[None]]] = {}
        self._started_events: dict[str, asyncio.Event] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._events: set[asyncio.Task[None]] = set()  # Event writes, flushed at the end
        self._last_event: asyncio.Task[None] | None = None  # the Event written last
        self._config_env: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        self._service_env: dict[str, dict[str, str]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._pre_stop_started: set[str] = set()
        self.sandbox: Sandbox | None = None
        self._sandbox_message: str | None = None
        self._not_isolated = False
        self._cgroups: dict[str, ContainerCgroup] = {}  # container → its attempt's cgroup
        self.task: asyncio.Task[None] | None = None

    # -- inputs ----------------------------------------------------------------------------

    def update(self, pod: Obj) -> None:
        """A newer version of the pod from the informer."""
        if pod["metadata"].get("uid") != self.uid or _rv(pod) < _rv(self.pod):
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
            self._spawn(self._kill(r, KillReason.DEFINITION_CHANGED))

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
        status_task = asyncio.create_task(self._status_loop(), name=f"status:{self.uid}")
        if config_volumes(self.pod):
            self._background.add(asyncio.create_task(self._refresh_config_volumes(),
                                                     name=f"config-volumes:{self.uid}"))
        try:
            if self.rejection is not None:
                await self._reject(self.rejection)
                return
            self.dir.prepare(self.pod)
            await self._project_volumes()
            self._adopt()
            if self._start_time is None:
                self._start_time = rfc3339(self.env.clock.now())
            if self._phase not in ("Succeeded", "Failed") or self.active:
                await self._run_until_terminating()
            if self.terminating:
                await self._terminate()
            await self._finish()
        finally:
            for tasks in self._probes.values():
                for t in tasks:
                    t.cancel()
            for t in self._background:
                t.cancel()
            for timer in (self._timer, self._deadline_timer):
                if timer is not None:
                    timer.cancel()
            status_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await status_task
            await self._flush_events()

    async def _project_volumes(self) -> None:
        """AX3: write the projected token volume before any container starts, then keep
        its token fresh in the background."""
        if not has_projected_volumes(self.pod):
            return
        volume_dir = self.dir.path / "volumes"
        try:
            due = await write_projected_volumes(self.pod, volume_dir, self.env.api,
                                                root_ca_file=self.env.root_ca_file)
        except ApiError as err:
            self._event(WARNING, "FailedMount", "MountVolume.SetUp failed for the "
                        f"ServiceAccount token volume: {err.message}")
            due = self.env.clock.now() + 5.0
        if due is not None:
            task = asyncio.create_task(keep_projected_volumes(
                self.pod, volume_dir, self.env.api, root_ca_file=self.env.root_ca_file,
                first_due=due), name=f"projected:{self.uid}")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

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
            if not r.has_run() or self._should_restart(r, policy):
                await self._maybe_start(r)
        return not any(r.running or r.killing or self._should_restart(r, policy)
                       or not r.has_run() for r in apps)

    async def _volumes_ready(self) -> bool:
        """SC1: containers start only while every claim's volume is attached to this node;
        a pod whose volume is taken away while it runs is killed (it lost its storage)."""
        try:
            readiness = await self.volumes.check(node_name=self.env.node_name)
        except ApiError as err:
            readiness_message = f"cannot check the pod's volumes: {err.message}"
            log.warning(readiness_message, extra={"pod": f"{self.namespace}/{self.name}"})
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return False
        if readiness.ready:
            for name, path in readiness.paths.items():
                self.dir.link_claim(name, path)
            self._volume_message = None
            return True
        if self.active:
            message = (f"{readiness.message}; the pod was using it, so it is killed: it lost "
                       "its storage")
            self._event(WARNING, "VolumeDetached", message)
            log.warning("volume taken away from a running pod; killing it",
                        extra={"pod": f"{self.namespace}/{self.name}", "detail": message})
            self._eviction_reason = "VolumeDetached"
            self.evict(override=_LOST_VOLUME_GRACE_SECONDS, message=message)
            return False
        for r in self.records:
            if not r.has_run():
                r.state = {"waiting": {"reason": "ContainerCreating",
                                       "message": readiness.message}}
        if readiness.message != self._volume_message:
            self._volume_message = readiness.message
            self._event(WARNING, "FailedAttachVolume", readiness.message)
            self._status_dirty.set()
        if readiness.message.startswith("persistentvolumeclaim"):
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
        return False

    @property
    def _host_network(self) -> bool:
        return bool(self.pod.get("spec", {}).get("hostNetwork"))

    async def _sandbox_ready(self) -> bool:
        """SB1: the pod's sandbox exists before any of its containers starts."""
        if self.sandbox is not None or self._not_isolated:
            return True
        if self.env.sandboxes is None:
            if not self._host_network:
                self._announce_not_isolated(NOT_ISOLATED_MESSAGE)
            return True
        try:
            if self._host_network:  # AU8: the node's network, but a root of its own
                self.sandbox = Sandbox(uid=self.uid, ip=POD_IP, hostname=socket.gethostname(),
                                       host_network=True)
            else:
                self.sandbox = await self.env.sandboxes.ensure(self.pod, holders=[
                    r.handle.pid for r in self.records if r.handle is not None])
            if self.sandbox is None:
                self._announce_not_isolated(
                    NO_POD_CIDR_MESSAGE.format(node=self.env.node_name))
                return True
        except SandboxError as err:
            message = str(err)
            for r in self.records:
                if not r.has_run():
                    r.state = {"waiting": {"reason": "ContainerCreating", "message": message}}
            if message != self._sandbox_message:
                self._sandbox_message = message
                self._event(WARNING, "FailedCreatePodSandBox", message)
                self._status_dirty.set()
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return False
        try:
            mount_memory_volumes(self.pod, self.dir.volume_path)
        except OSError as err:
            log.warning("cannot mount a memory-backed emptyDir", extra={
                "pod": f"{self.namespace}/{self.name}", "error": str(err)})
            self._event(WARNING, "FailedMount", f"emptyDir medium Memory: {err}")
        self._sandbox_message = None
        self._status_dirty.set()
        return True

    def _announce_not_isolated(self, message: str) -> None:
        """SB1: never a silent difference: the pod carries an event saying what is shared."""
        self._not_isolated = True
        self._event(WARNING, "SandboxNotIsolated", message)

    async def _remove_sandbox(self) -> None:
        """SB4: the sandbox goes once the pod's last process is gone."""
        if self.env.sandboxes is None or self._not_isolated:
            return
        try:
            unmount_memory_volumes(self.dir.path)
            if not self._host_network:
                await self.env.sandboxes.remove(self.uid)
        except OSError as err:
            log.warning("could not remove the pod's sandbox", extra={
                "pod": f"{self.namespace}/{self.name}", "error": str(err)})

    @staticmethod
    def _should_restart(r: ContainerRecord, policy: str) -> bool:
        if r.running or not r.has_run():
            return False
        return r.redefined or policy == "Always" or (policy == "OnFailure"
                                                     and r.exit_code != 0)

    async def _maybe_start(self, r: ContainerRecord) -> None:
        """Start `r` now, or wait out its CrashLoopBackOff (LC3)."""
        if r.has_run():
            if r.state.get("terminated"):
                # LC2: the crash is published as state.terminated before anything replaces
                # it (kubectl shows Error/Completed, then CrashLoopBackOff).
                await self._write_status()
                if self.terminating:
                    return  # termination was requested meanwhile: nothing starts
            key = (self.uid, r.name)
            finished = r.finished_at if r.finished_at is not None else self.env.clock.now()
            if self.env.backoff.in_backoff_since(key, finished):
                delay = self.env.backoff.get(key)
                # kuberuntime's doBackOff: every sync that declines to restart says so.
                self._event(WARNING, "BackOff", f"Back-off restarting failed container "
                            f"{r.name} in pod {self.name}_{self.namespace}({self.uid})")
                self._retire_termination(r)
                r.state = {"waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {delay:g}s restarting failed container={r.name} "
                               f"pod={self.name}_{self.namespace}({self.uid})"}}
                self._status_dirty.set()
                self._wake_at(finished + delay)
                return
            self.env.backoff.next(key)
            count_restart(r)
        await self._start_container(r)

    def _wake_at(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, when - self.env.clock.now())
        self._timer = asyncio.get_running_loop().call_later(delay, self._wake.set)

    def _config(self, r: ContainerRecord) -> ContainerConfig:
        spec = r.spec
        env_from, keyed = self._config_env.get(r.name, ({}, {}))
        services = self._service_env.get(r.name, {})
        base = {**self._runtime_env(spec),
                **{k: v for k, v in self.env.base_env.items()
                   if "KUBERNETES_SERVICE_HOST" not in services
                   or not k.startswith("KUBERNETES_")},
                **services, **env_from}
        env = container_env(self.pod, spec, node_name=self.env.node_name, base=base,
                            allocatable=self.env.allocatable or None)
        env.update(keyed)
        env = self._with_pod_ip(spec, env)
        sandbox = self._container_sandbox(r)
        return ContainerConfig(
            pod_uid=self.uid, namespace=self.namespace, pod_name=self.name, name=r.name,
            # `$(VAR)` in command and args from the container's final environment
            command=container_command(spec, self.env.image_commands, env=env),
            env=env,
            # AU8: in its own root a container starts in `workingDir` or "/"; sharing the
            # host, in the pod's directory (where its volumes are linked)
            working_dir=Path(str(spec.get("workingDir") or "/")) if sandbox is not None
            else self.dir.working_dir(spec),
            log_path=self.dir.log_path(r.name, r.restart_count),
            image=str(spec.get("image", "")), sandbox=sandbox,
            stdin=bool(spec.get("stdin")), stdin_once=bool(spec.get("stdinOnce")),
            tty=bool(spec.get("tty")))

    def _runtime_env(self, container: Obj) -> dict[str, str]:
        """AU8: what a container runtime adds before the pod's variables: PATH, HOSTNAME and
        HOME (the user's, from the container's minimal /etc/passwd). A pod sharing the
        host keeps the node's PATH (its programs are the node's) and the node's hostname."""
        if self.sandbox is None:
            try:
                home = pwd.getpwuid(os.geteuid()).pw_dir
            except KeyError:
                home = "/"
            return {"PATH": os.environ.get("PATH") or STANDARD_PATH,
                    "HOSTNAME": socket.gethostname(), "HOME": home}
        plan = plan_security(self.pod, container)
        return {"PATH": STANDARD_PATH, "HOSTNAME": self.sandbox.hostname, "HOME": plan.home}

    def _container_sandbox(self, r: ContainerRecord) -> Sandbox | None:
        """SB3: the sandbox with this container's volumes at their mountPath, and its
        termination-log file at its terminationMessagePath (mounted last, as kuberuntime
        does)."""
        if self.sandbox is None:
            return None
        container = r.spec
        for volume in self.pod["spec"].get("volumes") or []:
            if "downwardAPI" in volume:
                write_downward_api(self.dir.volume_path(str(volume["name"])), volume,
                                   self.pod, self._field_value,
                                   allocatable=self.env.allocatable or None)
        security = plan_security(self.pod, container)
        etc = etc_host_mounts(
            self.dir.path, self.pod, container, ip=self.sandbox.ip,
            hostname=self.sandbox.hostname, domain=self.env.cluster_domain,
            resolv_conf=self._resolv_conf())
        if self.sandbox.host_network:  # the node's own /etc/hosts and /etc/hostname
            etc = tuple(BindMount(m.target, m.target, read_only=True)
                        if m.target in ("/etc/hosts", "/etc/hostname") else m for m in etc
                        if m.target == "/etc/resolv.conf" or Path(m.target).is_file())
        mounts = plan_mounts(container, self.dir.volume_path) + etc + \
            self._termination_log_mount(r)
        # AU8: the container's own root filesystem, made on a directory of the pod's
        root = RootView(mount_point=str(self.dir.path / "rootfs"), mounts=mounts,
                        working_dir=str(container.get("workingDir") or "/"),
                        read_only=security.read_only_root, privileged=security.privileged,
                        entries=system_entries())
        return self.sandbox.for_container(root=root, security=security,
                                          landlock=plan_landlock(
                                              self.pod, privileged=security.privileged))

    def _container_refused(self, r: ContainerRecord) -> str | None:
        """AU8: why the kubelet will not create this container (its waiting reason is
        CreateContainerConfigError): runAsNonRoot with a root user, a subPath that leaves
        its volume."""
        image_uid = 0 if self.sandbox is not None else os.geteuid()
        refused = run_as_non_root_error(self.pod, r.spec, image_uid=image_uid)
        if refused is None and self.sandbox is not None:
            try:
                plan_mounts(r.spec, self.dir.volume_path)
            except SubPathError as err:
                refused = str(err)
        return refused

    def _termination_log(self, r: ContainerRecord) -> Path:
        """This attempt's termination-log file in the pod's directory (kuberuntime makes
        one per container instance under the pod's containers directory)."""
        return self.dir.path / "termination-logs" / r.name / str(r.restart_count)

    def _create_termination_log(self, r: ContainerRecord) -> None:
        """Before a sandboxed container starts: an empty termination-log file, writable by
        anyone (0666, as kuberuntime), and its mount point on the node if missing."""
        target = termination_message_path(r.spec)
        if self.sandbox is None or target is None:
            return
        path = self._termination_log(r)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            path.chmod(0o666)
        except OSError as err:
            log.warning("cannot make the container's termination-log file", extra={
                "pod": f"{self.namespace}/{self.name}", "container": r.name,
                "path": target, "error": str(err)})

    def _termination_log_mount(self, r: ContainerRecord) -> tuple[BindMount, ...]:
        """The bind mount of this attempt's termination-log file at terminationMessagePath
        (none when the file or a non-directory mount point is missing)."""
        target = termination_message_path(r.spec)
        path = self._termination_log(r)
        if target is None or not path.is_file():
            return ()
        return (BindMount(str(path), target),)

    def _resolv_conf(self) -> str:
        """The pod's /etc/resolv.conf (dnsconfig.py); the kubelet's warnings about it go
        on the pod once, as Kubernetes' MissingClusterDNS and DNSConfigForming events."""
        try:
            host = parse_resolv_conf(Path(self.env.resolv_conf).read_text())
        except OSError:
            host = ResolvConf()
        conf, fell_back = pod_resolv_conf(self.pod, cluster_dns=list(self.env.cluster_dns),
                                          cluster_domain=self.env.cluster_domain, host=host)
        if not self._dns_reported:
            self._dns_reported = True
            if fell_back:
                self._event("Warning", "MissingClusterDNS", MISSING_CLUSTER_DNS)
            for note in conf.notes:
                self._event("Warning", "DNSConfigForming", note)
        return conf.render()

    def _with_pod_ip(self, container: Obj, env: dict[str, str]) -> dict[str, str]:
        """`valueFrom.fieldRef` status.podIP/podIPs is the sandbox's address (SB1)."""
        if self.sandbox is None:
            return env
        for item in container.get("env") or []:
            ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if ref in ("status.podIP", "status.podIPs"):
                env[str(item.get("name", ""))] = self.sandbox.ip
        return env

    def _field_value(self, path: str) -> str:
        return field_ref_value(self.pod, path, self.env.node_name, pod_ip=self._pod_ip())

    def exec_config(self, r: ContainerRecord) -> ContainerConfig:
        """What pods/exec runs a command with in container `r` (SB4), in its cgroup."""
        return self._in_cgroup(r, self._config(r))

    def _in_cgroup(self, r: ContainerRecord, config: ContainerConfig) -> ContainerConfig:
        """AU8: a command run in running container `r` (exec, a probe, a hook) joins its
        cgroup, as it would run inside a real container."""
        if self.env.cgroups is None or not r.running:
            return config
        return dataclasses.replace(config, join_cgroup=self.env.cgroups.container(
            self.pod, r.name).join(strict=False))

    @staticmethod
    def _retire_termination(r: ContainerRecord) -> None:
        """LC2: lastState holds the latest termination, once state moves on from it."""
        if r.state.get("terminated"):
            r.last_state = {"terminated": r.state["terminated"]}

    async def _resolve_config(self, r: ContainerRecord) -> bool:
        """ConfigMaps and Secrets the container reads (env and volumes); False, with the
        container waiting in CreateContainerConfigError (ContainerCreating, with a
        FailedMount event, for a volume), while one is missing."""
        try:
            await refresh_config_volumes(self.env.api, self.pod, self.dir.volume_path)
            self._config_env[r.name] = await resolve_env(self.env.api, self.pod, r.spec)
            self._service_env[r.name] = await self._services_env()
        except VolumeError as err:  # the volume waits, the container is not created yet
            r.state = {"waiting": {"reason": "ContainerCreating"}}
            self._event(WARNING, "FailedMount", str(err))
            self._status_dirty.set()
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return False
        except (ConfigError, ApiError) as err:
            message = str(err) if isinstance(err, ConfigError) else err.message
            r.state = {"waiting": {"reason": "CreateContainerConfigError",
                                   "message": message}}
            self._event(WARNING, "Failed", f"Error: {message}")
            self._status_dirty.set()
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return False
        return True

    async def _services_env(self) -> dict[str, str]:
        """AX7: the Service variables; a pod outside a sandbox cannot reach cluster IPs (the
        service proxy serves them in the pod network), so it keeps the `kubernetes`
        Service's variables that name the apiserver's own address (--kube-api-address)."""
        services = await self.env.api.list("services", namespace=self.namespace)
        try:
            kubernetes: Obj | None = await self.env.api.get("services", "kubernetes",
                                                            namespace="default")
        except ApiError:
            kubernetes = None
        env = service_env(self.pod, list(services.get("items") or []), kubernetes)
        if self.sandbox is None or self.sandbox.host_network:
            env = {k: v for k, v in env.items() if not k.startswith("KUBERNETES_")}
        return env

    async def _refresh_config_volumes(self) -> None:
        """Updates of a mounted ConfigMap/Secret reach the files (the volume manager's
        periodic remount)."""
        while True:
            await asyncio.sleep(self.env.config_volume_refresh_seconds)
            try:
                await refresh_config_volumes(self.env.api, self.pod, self.dir.volume_path)
            except (ConfigError, ApiError) as err:
                log.info("config volume not refreshed", extra={
                    "pod": f"{self.namespace}/{self.name}", "error": str(err)})

    async def _start_container(self, r: ContainerRecord) -> None:
        self._retire_termination(r)
        if not await self._resolve_config(r):
            return
        refused = self._container_refused(r)
        if refused is not None:
            r.state = {"waiting": {"reason": "CreateContainerConfigError",
                                   "message": refused}}
            self._event(WARNING, "Failed", f"Error: {refused}")
            self._status_dirty.set()
            self._wake_at(self.env.clock.now() + _CLAIM_RETRY_SECONDS)
            return
        if self.sandbox is not None:
            open_empty_dirs(self.pod, self.dir.volume_path)
            fs_group_volumes(self.pod, self.dir.volume_path)
        self._create_termination_log(r)
        config = self._config(r)
        r.image = config.image
        try:
            if self.env.cgroups is not None:  # AU8: a fresh cgroup with the limits
                cgroup = self._cgroups[r.name] = self.env.cgroups.prepare(self.pod, r.spec)
                config = dataclasses.replace(config, join_cgroup=cgroup.join())
            handle = await self.env.runtime.start(config)
        except OSError as err:
            now = self.env.clock.now()
            r.attempts += 1
            r.exit_code, r.finished_at = 128, now
            r.state = {"terminated": {"exitCode": 128, "reason": "StartError",
                                      "message": str(err), "startedAt": rfc3339(now),
                                      "finishedAt": rfc3339(now)}}
            self._event(WARNING, "Failed", f"Error: {err}")
            self._wake.set()
            return
        r.handle = handle
        r.redefined = False
        r.attempts += 1
        r.exit_code = r.finished_at = None
        r.started = r.ready = r.post_start_done = False
        r.state = {"waiting": {"reason": "ContainerCreating"}}
        handle.exited.add_done_callback(self._exit_callback(r, handle))
        self._save()
        self._status_dirty.set()
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
                return
        if not handle.running:
            return
        r.post_start_done = True
        r.state = {"running": {"startedAt": rfc3339(handle.started_at)}}
        self._start_probes(r)
        self._status_dirty.set()

    def _start_probes(self, r: ContainerRecord) -> None:
        started = asyncio.Event()
        self._started_events[r.name] = started
        if not r.spec.get(STARTUP):
            r.started = True
            started.set()
            if not r.spec.get(READINESS) and r.kind in (APP, SIDECAR):
                r.ready = True  # LC7: no readiness probe means Success once started
        config = self._in_cgroup(r, self._config(r))
        handle = r.handle

        async def run(probe: dict[str, Any], timeout: float) -> Any:
            return await run_handler(probe, container=r.spec, runtime=self.env.runtime,
                                     handle=handle, config=config, timeout=timeout)

        tasks = []
        for kind in (STARTUP, LIVENESS, READINESS):
            if r.spec.get(kind):
                worker = ProbeWorker(record=r, kind=kind, run=run,
                                     on_change=self._on_probe_change,
                                     on_failure=self._on_probe_failure,
                                     on_unhealthy=self._on_probe_unhealthy, started=started,
                                     clock=self.env.clock)
                tasks.append(asyncio.create_task(worker.run(), name=f"probe:{r.name}:{kind}"))
        self._probes[r.name] = tasks

    def _stop_probes(self, r: ContainerRecord, *, keep_readiness: bool = False) -> None:
        for t in self._probes.get(r.name, []):
            if keep_readiness and t.get_name().endswith(READINESS):
                continue
            t.cancel()

    def _on_probe_change(self) -> None:
        self._status_dirty.set()
        self._wake.set()

    def _on_probe_unhealthy(self, r: ContainerRecord, message: str) -> None:
        """Kubernetes' prober: a Warning Unhealthy Event for every failed probe (repeats
        are counted on one Event by the recorder)."""
        self._event(WARNING, "Unhealthy", message)

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
        self._spawn(self._kill(r, reason))

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
        message = self._termination_message(r, code, reason)
        if message:
            r.state["terminated"]["message"] = message
        self._stop_probes(r)
        self._save()
        self._status_dirty.set()
        self._wake.set()

    def _oom_killed(self, r: ContainerRecord, code: int, handle: ContainerHandle) -> bool:
        """AU8: the kernel's OOM killer ended this attempt (its cgroup's own counter)."""
        if self.env.cgroups is None:
            return False
        cgroup = self._cgroups.get(r.name) or self.env.cgroups.container(self.pod, r.name)
        return cgroup.oom_killed(exit_code=code,
                                 kubelet_killed=signals.SIGKILL in handle.signals_sent)

    def _termination_message(self, r: ContainerRecord, code: int, reason: str) -> str:
        """What the exited attempt left at its terminationMessagePath (only a sandboxed
        container has a file of its own there), or with FallbackToLogsOnError the tail of
        its log when that is empty and it failed."""
        message_file: Path | None = None
        if termination_message_path(r.spec) is not None:
            candidate = self._termination_log(r)
            message_file = candidate if candidate.is_file() else None
        return termination_message(
            message_file, self.dir.log_path(r.name, r.restart_count),
            fallback_to_logs=falls_back_to_logs(r.spec, code, reason))

    # -- killing ---------------------------------------------------------------------------

    async def _kill(self, r: ContainerRecord, reason: KillReason, *,
                    override: int | None = None, ordering: TerminationOrdering | None = None,
                    skip_pre_stop: bool = False) -> None:
        stop = signal_number((r.spec.get("lifecycle") or {}).get("stopSignal"))
        await kill_container(r, pod=self.pod, runtime=self.env.runtime, reason=reason,
                             stop_signal=stop, run_pre_stop=self._run_pre_stop,
                             override=override, ordering=ordering,
                             skip_pre_stop=skip_pre_stop)

    async def _run_pre_stop(self, r: ContainerRecord, grace: float) -> None:
        """GT5: run preStop for at most the period; a failing or hanging hook is logged and
        abandoned (never retried) so termination goes on."""
        hook = r.spec["lifecycle"]["preStop"]
        self._pre_stop_started.add(r.name)
        task = asyncio.create_task(run_handler(
            hook, container=r.spec, runtime=self.env.runtime, handle=r.handle,
            config=self._in_cgroup(r, self._config(r)),
            timeout=grace + PRESTOP_EXTENSION_SECONDS),
            name=f"pre-stop:{r.name}:{self.uid}")
        try:
            done, _ = await asyncio.wait({task}, timeout=grace)
        except asyncio.CancelledError:
            # Termination restarts with a shorter period: the hook runs on, bounded by its
            # own timeout, and is not started again.
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            raise
        if not done:
            self._event(WARNING, "FailedPreStopHook",
                        f"PreStop hook for container {r.name} did not finish within the "
                        f"grace period ({grace:g}s); continuing termination")
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        result = task.result()
        if not result.success:
            self._event(WARNING, "FailedPreStopHook",
                        f"PreStop hook for container {r.name} failed: {result.message}")

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
        """Stop every container of the pod (GT4–GT9). The pod-level period (GT7) is the
        gracePeriodOverride of every container kill; a shorter period arriving meanwhile
        (a second DELETE, `kubectl delete --now`) restarts the kill with it, as
        Kubernetes' pod workers do."""
        reason, skip = self._kill_reason()
        for r in self.records:
            self._stop_probes(r, keep_readiness=True)  # GT12: readiness keeps running
        if not self.active:
            return
        self._pre_stop_started.clear()  # hooks of earlier (probe) kills do not count
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
            while True:
                running = [r for r in self.records if r.running]
                if not running:
                    return
                ordering = TerminationOrdering(self.records)
                kill = asyncio.ensure_future(asyncio.gather(*(
                    self._kill(r, reason, override=period, ordering=ordering,
                               skip_pre_stop=skip or r.name in self._pre_stop_started)
                    for r in running)))
                shorter = await self._wait_for_shorter_period(kill, period)
                if shorter is None:
                    return
                kill.cancel()
                await asyncio.wait({kill})
                log.info("grace period shortened during termination; restarting the kill",
                         extra={"pod": pod_name, "from": period, "to": shorter})
                self._event(NORMAL, "Killing", "Stopping containers with a shorter grace "
                            f"period ({shorter}s, was {period}s)")
                period = shorter

    async def _wait_for_shorter_period(self, kill: asyncio.Future[Any],
                                       period: int) -> int | None:
        """Wait for `kill`; on every pod update, recompute the effective period and return
        it as soon as it is shorter than `period` (Kubernetes: the period only decreases).
        None once `kill` finished."""
        while not kill.done():
            self._wake.clear()
            waker = asyncio.create_task(self._wake.wait())
            try:
                await asyncio.wait({kill, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waker.cancel()
            if kill.done():
                break
            shorter = self._effective_grace_period(current=period)
            if shorter < period:
                return shorter
        kill.result()
        return None

    def _active_deadline_exceeded(self) -> bool:
        """`activeDeadlineSeconds` (Kubernetes' activeDeadlineHandler): once the pod has
        been active that long since its startTime, it fails with reason DeadlineExceeded
        and its containers are killed with its grace period. Before then, wake at the
        deadline (the field may be shortened by an update)."""
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        deadline = self.pod.get("spec", {}).get("activeDeadlineSeconds")
        if deadline is None or isinstance(deadline, bool) or self._start_time is None:
            return False
        try:
            remaining = parse_rfc3339(self._start_time) + int(deadline) - self.env.clock.now()
        except (TypeError, ValueError):
            return False
        if remaining > 0:
            self._deadline_timer = asyncio.get_running_loop().call_later(
                remaining, self._wake.set)
            return False
        log.info("pod exceeded its active deadline; failing it",
                 extra={"pod": f"{self.namespace}/{self.name}", "deadline": deadline})
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
            await asyncio.gather(*(self._kill(r, KillReason.POD_TERMINATION,
                                              ordering=ordering)
                                   for r in self.records if r.running))
        await self._confirm_gone()
        await self._remove_sandbox()
        if self.env.cgroups is not None:
            await asyncio.to_thread(self.env.cgroups.remove_pod, self.uid)
        await asyncio.to_thread(self._tear_down_empty_dirs)
        await self._terminal_until_removed()
        self.dir.remove()

    def _tear_down_empty_dirs(self) -> None:
        """AU10: as the kubelet tears down a terminated pod's volumes, its emptyDir data
        goes (what a DiskPressure eviction reclaims); its logs stay for `kubectl logs`."""
        for volume in self.pod["spec"].get("volumes") or []:
            if "emptyDir" in volume:
                path = self.dir.volume_path(str(volume.get("name", "")))
                if not os.path.ismount(path):
                    shutil.rmtree(path, ignore_errors=True)

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
        await self._write_status()
        while not self._removed:
            if self.pod["metadata"].get("deletionTimestamp"):
                await self._delete()
            self._wake.clear()
            if self._removed:
                break
            await self._wake.wait()

    async def _confirm_gone(self) -> None:
        delay = 0.05
        while True:
            alive = [r for r in self.records
                     if r.handle is not None and not self.env.runtime.gone(r.handle)]
            if not alive:
                return
            for r in alive:
                assert r.handle is not None
                self.env.runtime.signal(r.handle, signals.SIGKILL)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _delete(self) -> None:
        try:
            await self.env.api.delete("pods", self.name, self.namespace,
                                      grace_period_seconds=0, uid=self.uid)
            self._removed = True
            log.info("pod deleted after its processes exited",
                     extra={"pod": f"{self.namespace}/{self.name}", "uid": self.uid})
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                self._removed = True
                return
            log.warning("could not delete pod; retrying",
                        extra={"pod": f"{self.namespace}/{self.name}", "error": err.message})
            await asyncio.sleep(1.0)

    # -- status ----------------------------------------------------------------------------

    def compute_status(self, pod: Obj) -> Obj:
        if self.rejection is not None:
            # As Kubernetes' rejectPod: only the phase and why (the scheduler's
            # PodScheduled condition stays).
            self._phase = "Failed"
            return {**copy.deepcopy(pod.get("status") or {}), "phase": "Failed",
                    "reason": self.rejection.reason,
                    "message": f"Pod was rejected: {self.rejection.message}",
                    "qosClass": qos_class(pod)}
        spec = pod.get("spec", {})
        previous = str(pod.get("status", {}).get("phase") or "Pending")
        if {"Pending": 0, "Running": 1}.get(previous, 2) < {"Pending": 0, "Running": 1}.get(
                self._phase, 2):
            previous = self._phase
        phase = pod_phase(self.records, restart_policy=str(spec.get("restartPolicy", "Always")),
                          terminating=self._terminal, previous=previous,
                          init_failed=self._init_failed)
        # Kubernetes' generateAPIPodStatus fails a pod whose active deadline passed at once
        # (ShouldEvict), while its containers are still being killed; an evicted pod fails
        # once terminal.
        if self._eviction is not None and (
                self._terminal or self._eviction_reason == "DeadlineExceeded"):
            phase = "Failed"
        self._phase = phase
        owned = ready_conditions(self.records, pod, sandbox_ready=not self._terminal,
                                 phase=phase)
        status: Obj = copy.deepcopy(pod.get("status") or {})
        status.update({
            "phase": phase,
            "conditions": merge_conditions(status.get("conditions") or [], owned,
                                           now=self.env.clock.now()),
            "hostIP": POD_IP, "hostIPs": [{"ip": POD_IP}],
            "podIP": self._pod_ip(), "podIPs": [{"ip": self._pod_ip()}],
            "startTime": self._start_time, "qosClass": qos_class(pod),
            "containerStatuses": [container_status(r) for r in self.records if r.kind == APP],
        })
        inits = [container_status(r) for r in self.records if r.kind in (INIT, SIDECAR)]
        if inits:
            status["initContainerStatuses"] = inits
        ephemeral = [container_status(r) for r in self.records if r.kind == EPHEMERAL]
        if ephemeral:
            status["ephemeralContainerStatuses"] = ephemeral
        if self._eviction is not None:
            status["reason"] = self._eviction_reason
            status["message"] = self._eviction[1]
            if self._eviction_reason == "Evicted":
                status["conditions"] = _with_disruption_target(
                    status["conditions"], message=self._eviction[1], now=self.env.clock.now())
        return status

    def _pod_ip(self) -> str:
        return self.sandbox.ip if self.sandbox is not None else POD_IP

    async def _status_loop(self) -> None:
        while True:
            await self._status_dirty.wait()
            self._status_dirty.clear()
            await self._write_status()

    async def _write_status(self) -> None:
        pod = self.pod
        for attempt in range(8):
            status = self.compute_status(pod)
            if status == self._last_written and attempt == 0:
                return
            body = copy.deepcopy(pod)
            body["status"] = status
            try:
                written = await self.env.api.update_status(body)
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                if err.reason != Reason.CONFLICT:
                    log.warning("status write failed; retrying", extra={
                        "pod": f"{self.namespace}/{self.name}", "error": err.message})
                    await asyncio.sleep(min(0.1 * 2 ** attempt, 2.0))
                try:
                    pod = await self.env.api.get("pods", self.name, self.namespace)
                except ApiError:
                    return
                if pod["metadata"].get("uid") != self.uid:
                    return
                continue
            self._last_written = status
            if _rv(written) > _rv(self.pod):
                self.pod = written
            return

    # -- helpers ---------------------------------------------------------------------------

    def _adopt(self) -> None:
        """GT8: re-attach to the processes an earlier kubelet started for this pod."""
        state = load_state(self.dir.path)
        if not state or state.get("uid") != self.uid:
            return
        saved = state.get("containers") or {}
        for r in self.records:
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
                    mark_lost(r, now=self.env.clock.now(), deleting=self.terminating,
                              has_init_containers=bool(self.pod["spec"].get("initContainers")))
                    self._status_dirty.set()
            if handle is not None:
                log.info("re-adopted a running container", extra={
                    "pod": f"{self.namespace}/{self.name}", "container": r.name,
                    "pid": handle.pid})
                r.handle = handle
                r.exit_code = None
                r.post_start_done = True
                r.state = {"running": {"startedAt": rfc3339(handle.started_at)}}
                handle.exited.add_done_callback(self._exit_callback(r, handle))
                self._start_probes(r)

    def _save(self) -> None:
        try:
            save_state(self.dir.path, pod=self.pod, records=self.records)
        except OSError as err:
            log.warning("could not save pod state", extra={"uid": self.uid, "error": str(err)})

    def _event(self, type_: str, reason: str, message: str) -> None:
        """Record an Event on the pod. The pod's Events are written one after another, in
        order: a repeat (an Unhealthy per failed probe, a BackOff per declined restart)
        then always finds the first one written and is counted on it by the recorder,
        never created twice because both were in flight at once."""
        previous, pod = self._last_event, self.pod

        async def write() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait({previous})
            await self.env.recorder.event(pod, type_, reason, message)

        task = asyncio.create_task(write(), name=f"event:{reason}:{self.uid}")
        self._last_event = task
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _flush_events(self, timeout: float = 5.0) -> None:
        """Let the Events still being written reach the apiserver before the worker ends
        (bounded, so a lost apiserver cannot hold it up); cancel what is left."""
        if self._events:
            _, pending = await asyncio.wait(set(self._events), timeout=timeout)
            for task in pending:
                task.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name=f"pod-worker:{self.uid}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _with_disruption_target(conditions: list[Obj], *, message: str, now: float) -> list[Obj]:
    """GT11: a pod the kubelet evicts for node pressure carries DisruptionTarget=True,
    reason TerminationByKubelet (Kubernetes' eviction manager)."""
    if any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
           for c in conditions):
        return conditions
    return [c for c in conditions if c.get("type") != "DisruptionTarget"] + [{
        "type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
        "message": message, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}]
