"""The `ContainerRuntime` seam: what the kubelet needs from whatever runs pods.

Shaped like CRI's RuntimeService: a pod sandbox step first (`run_pod_sandbox`: the pod's
namespaces, its address and hostname; `stop_pod_sandbox` / `remove_pod_sandbox`, with the
pod's cgroups, once its last process is gone), then containers started in it, each
attempt in a cgroup with its limits (`ContainerConfig.resources`). Skiff's containers are
not images: the default `ProcessRuntime` runs a container's `command` + `args` as a local
process in its own process group, inside the pod's sandbox when it may make one;
`FakeRuntime` runs nothing (hollow nodes for scale tests) and only records its sandboxes.
Pod workers only talk to this protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from skiff.api.types import Obj, ObjView
from skiff.kubelet.sandbox import Sandbox

__all__ = ["ContainerConfig", "ContainerHandle", "ContainerResources", "ContainerRuntime",
           "ExecResult", "PodSandbox", "PodSandboxConfig"]


@dataclass(frozen=True)
class PodSandboxConfig:
    """CRI's PodSandboxConfig: the pod a sandbox is made for."""

    pod: Obj
    # PIDs of the pod's containers a restarted kubelet re-adopted: their namespaces are
    # the pod's, so the sandbox is theirs
    holders: tuple[int, ...] = ()

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    @property
    def host_network(self) -> bool:
        return bool((self.pod.get("spec") or {}).get("hostNetwork"))


@dataclass(frozen=True)
class PodSandbox:
    """What `run_pod_sandbox` made: the pod's sandbox, or None when the pod shares the
    node (`not_isolated` then says why, for the pod's SandboxNotIsolated event; empty for
    a `hostNetwork` pod, which asked to)."""

    sandbox: Sandbox | None
    not_isolated: str = ""


@dataclass(frozen=True)
class ContainerResources:
    """CRI's LinuxContainerResources as Skiff reads them (AU8): the pod (its QoS class and
    pod-level limits) and the container (its requests and limits), from which the
    runtime makes the attempt's cgroup."""

    pod: ObjView
    container: ObjView


@dataclass(frozen=True)
class ContainerConfig:
    """Everything needed to start one container (one attempt of it)."""

    pod_uid: str
    namespace: str
    pod_name: str
    name: str
    command: list[str]
    env: dict[str, str]
    working_dir: Path
    log_path: Path
    image: str = ""
    # The pod's sandbox (SPEC SB1): the process joins its namespaces before exec.
    sandbox: Sandbox | None = None
    # `stdin: true`: the container's stdin stays open for pods/attach (SB4);
    # `stdinOnce`: it closes when the first attach session closes it.
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False  # on a terminal the kubelet holds (runtime/terminal.py)
    # AU8: the child's first pre-exec step, moving it into the container's cgroup (before
    # it enters the sandbox), so nothing it allocates escapes the limits (cgroups.py);
    # a container the runtime starts gets its cgroup from `resources` instead
    join_cgroup: Callable[[], None] | None = field(default=None, compare=False)
    # what `start` makes the attempt's cgroup from (None: no cgroup of its own)
    resources: ContainerResources | None = field(default=None, compare=False)


@dataclass(eq=False)
class ContainerHandle:
    """A running (or finished) container: its process group and when it started.

    `exited` resolves to the exit code (128 + signal when killed by one); for a process
    re-adopted after a kubelet restart the code is unknown and is `None`.
    """

    id: str
    pid: int
    pgid: int
    start_ticks: int
    started_at: float
    exited: asyncio.Future[int | None] = field(repr=False)
    signals_sent: list[int] = field(default_factory=list)
    # the write end of the container's stdin (containers with `stdin: true`; lost when the
    # kubelet restarts, as the process is re-adopted without it)
    stdin: IO[bytes] | None = field(default=None, repr=False)
    # AU8: whether the kernel's OOM killer ended it, as the runtime saw in the cgroup it
    # made (CRI's OOMKilled reason); None: the runtime cannot tell (no cgroup of its own,
    # or a container re-adopted after a kubelet restart)
    oom_killed: bool | None = None

    @property
    def running(self) -> bool:
        return not self.exited.done()


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str
    timed_out: bool = False


class ContainerRuntime(Protocol):
    async def run_pod_sandbox(self, config: PodSandboxConfig) -> PodSandbox:
        """Make the pod's sandbox (idempotent: the same pod gets its sandbox again);
        raises sandbox.SandboxError while it cannot be made yet (retried)."""
        ...

    async def stop_pod_sandbox(self, pod_uid: str) -> None:
        """Reclaim the sandbox's network (its namespace and address) once the pod's last
        process is gone; idempotent, also for a sandbox an earlier kubelet made."""
        ...

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        """Remove what is left of the stopped sandbox (the pod's cgroups); idempotent."""
        ...

    async def start(self, config: ContainerConfig) -> ContainerHandle:
        """Start the container; raises OSError (e.g. command not found) when it cannot."""
        ...

    def signal(self, handle: ContainerHandle, sig: int) -> None:
        """Send `sig` to the container's whole process group (no error if it is gone)."""
        ...

    def gone(self, handle: ContainerHandle) -> bool:
        """True once no live process of the container's group remains (PS1)."""
        ...

    def adopt(self, *, pid: int, pgid: int, start_ticks: int,
              started_at: float) -> ContainerHandle | None:
        """Re-attach to a container started by an earlier kubelet (GT8), or None if dead."""
        ...

    async def exec(self, handle: ContainerHandle | None, config: ContainerConfig,
                   command: list[str], *, timeout: float) -> ExecResult:
        """Run `command` "inside" the container (its env, dir and process group)."""
        ...

    def memory_bytes(self, handle: ContainerHandle) -> int:
        """Resident memory of the container's processes (eviction signals)."""
        ...
