"""The default runtime: a container is `command` + `args` run as a local OS process.

Each container gets its own session and process group (so SIGTERM/SIGKILL reach every
process it forked), its stdout and stderr appended to a log file, and a pidfd so its exit
wakes the event loop without polling. The image is not pulled or used: it is recorded in the
status only. A container started by an earlier kubelet is re-adopted by PID after checking
its start time in /proc, so a reused PID is never mistaken for it (GT8).

A container's environment is only what the pod worker computed for it (Kubernetes' PATH,
HOME, HOSTNAME, the pod's `env`/`envFrom` and service variables): nothing of the kubelet's
own environment reaches it. In a sandbox the process starts in the container's working
directory inside its own root (`sandbox.rootfs`); the stand-in then runs on the node's
/usr/bin/python3 from its source, as the kubelet's own Python is not in the container.
Why a sandboxed container could not be made (a mount, a missing working directory) comes
back from the child through a pipe, as the container's StartError message.

The pod sandbox step (SPEC SB1) is the runtime's: given a `SandboxManager` (as root with
the capabilities namespaces need) each pod gets its network namespace, address and
hostname before its first container, and loses them once its last process is gone; a
`hostNetwork` pod keeps the node's network but still gets a root of its own. Without a
manager, pods share the node and are told so. Given the node's `CgroupManager` (AU8), each
container attempt starts in a fresh cgroup with its limits, its exit says whether the OOM
killer ended it, and the pod's cgroups go with its sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal as signals
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from skiff.kubelet.cgroups import CgroupManager, ContainerCgroup
from skiff.kubelet.handlers import POD_IP
from skiff.kubelet.runtime import (
    ContainerConfig,
    ContainerHandle,
    ExecResult,
    PodSandbox,
    PodSandboxConfig,
)
from skiff.kubelet.runtime.images import STANDIN_MODULE
from skiff.kubelet.runtime.terminal import Terminal
from skiff.kubelet.sandbox import (
    NO_POD_CIDR_MESSAGE,
    NOT_ISOLATED_MESSAGE,
    Sandbox,
    SandboxManager,
)
from skiff.procfs import ProcStat, container_group, read_stat

__all__ = ["STANDARD_PATH", "ProcessRuntime", "base_environment", "child_setup"]

log = logging.getLogger(__name__)

# The PATH a container runtime gives a container whose image sets none.
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def base_environment() -> dict[str, str]:
    """What every container starts with before its own variables: Kubernetes' PATH, never
    the kubelet's environment."""
    return {"PATH": STANDARD_PATH}


def _command(config: ContainerConfig) -> list[str]:
    """The stand-in in a container's own root: the node's python3 runs its source (the
    kubelet's interpreter and packages are not in the container)."""
    command = config.command
    root = config.sandbox.root if config.sandbox is not None else None
    if root is not None and command[1:4] == ["-P", "-m", STANDIN_MODULE]:
        source = Path(__file__).with_name("standin.py").read_text()
        return ["python3", "-P", "-c", source, *command[4:]]
    return command


def _cwd(config: ContainerConfig) -> str | None:
    """In a sandbox the child changes to the working directory inside the container's root."""
    return None if config.sandbox is not None and config.sandbox.root is not None else str(
        config.working_dir)


def _reporting(enter: Callable[[], None] | None, fd: int) -> Callable[[], None] | None:
    """`enter`, writing why it failed to `fd` (read back by `_failed`)."""
    if enter is None:
        return None

    def setup() -> None:
        try:
            enter()
        except OSError as err:
            os.write(fd, str(err.strerror or err).encode(errors="replace"))
            raise
    return setup


def _failed(fd: int, err: BaseException) -> OSError:
    data = b""
    with contextlib.suppress(OSError):
        data = os.read(fd, 4096)
    return OSError(data.decode(errors="replace") or f"cannot start the container: {err}")


def _exit_code(returncode: int | None) -> int | None:
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


_CATCHABLE = [s for s in signals.Signals if s not in (signals.SIGKILL, signals.SIGSTOP)]


def default_signals(then: Callable[[], None] | None = None) -> Callable[[], None]:
    """The child's set-up before exec: every signal at its default action and none blocked,
    as a container runtime starts a container, whatever the kubelet inherited (under `nohup`
    SIGHUP is ignored, exec keeps it ignored, and a shell may not even `trap` a signal that
    was ignored when it started); then `then` (entering the pod's sandbox)."""
    def setup() -> None:
        for sig in _CATCHABLE:
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signals.signal(sig, signals.SIG_DFL)
        signals.pthread_sigmask(signals.SIG_SETMASK, ())
        if then is not None:
            then()
    return setup


def child_setup(config: ContainerConfig, *, pid: int | None = None
                 ) -> Callable[[], None] | None:
    """After the signals: join the container's cgroup (AU8), then enter the sandbox (join
    running container `pid`'s namespaces and root when given)."""
    sandbox = config.sandbox
    enter: Callable[[], None] | None = None
    if sandbox is not None:
        enter = sandbox.enter if pid is None else (lambda: sandbox.join(pid))
    join = config.join_cgroup
    if join is None or enter is None:
        return join or enter

    def both() -> None:
        join()
        enter()
    return both


class ProcessRuntime:
    """`sandboxes`: the node's pod sandboxes (None: pods share the node's network);
    `cgroups`: the node's cgroups (None: limits are not enforced)."""

    def __init__(self, *, sandboxes: SandboxManager | None = None,
                 cgroups: CgroupManager | None = None) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._sandboxes = sandboxes
        self._cgroups = cgroups
        self._node_network: set[str] = set()  # pods on the node's network: nothing to undo

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> PodSandbox:
        if self._sandboxes is None:
            return PodSandbox(None, "" if config.host_network else NOT_ISOLATED_MESSAGE)
        if config.host_network:  # AU8: the node's network, but a root of its own
            self._node_network.add(config.uid)
            return PodSandbox(Sandbox(uid=config.uid, ip=POD_IP,
                                      hostname=socket.gethostname(), host_network=True))
        sandbox = await self._sandboxes.ensure(config.pod, holders=config.holders)
        if sandbox is None:
            self._node_network.add(config.uid)
            return PodSandbox(None, NO_POD_CIDR_MESSAGE.format(
                node=self._sandboxes.node_name))
        return PodSandbox(sandbox)

    async def stop_pod_sandbox(self, pod_uid: str) -> None:
        if self._sandboxes is not None and pod_uid not in self._node_network:
            await self._sandboxes.remove(pod_uid)

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        self._node_network.discard(pod_uid)
        if self._cgroups is not None:
            await asyncio.to_thread(self._cgroups.remove_pod, pod_uid)

    def _attempt_cgroup(self, config: ContainerConfig
                        ) -> tuple[ContainerConfig, ContainerCgroup | None]:
        """AU8: a fresh cgroup with the limits for this attempt, joined first thing in the
        child; raises OSError (the attempt's StartError)."""
        if self._cgroups is None or config.resources is None:
            return config, None
        cgroup = self._cgroups.prepare(dict(config.resources.pod),
                                       dict(config.resources.container))
        return dataclasses.replace(config, join_cgroup=cgroup.join()), cgroup

    async def start(self, config: ContainerConfig) -> ContainerHandle:
        config, cgroup = self._attempt_cgroup(config)
        if not config.command:
            raise OSError(f"container {config.name!r} has no command: Skiff runs "
                          "`command` + `args` as a process (the image is not run)")
        config.log_path.parent.mkdir(parents=True, exist_ok=True)
        if config.sandbox is not None and config.sandbox.root is not None:
            Path(config.sandbox.root.mount_point).mkdir(parents=True, exist_ok=True)
        errors_read, errors_write = os.pipe()
        try:
            enter = _reporting(child_setup(config), errors_write)
            try:
                if config.tty:
                    return self._start_on_terminal(config, enter, cgroup)
                with open(config.log_path, "ab") as logf:
                    popen = subprocess.Popen(
                        _command(config), stdout=logf, stderr=subprocess.STDOUT,
                        stdin=subprocess.PIPE if config.stdin else subprocess.DEVNULL,
                        cwd=_cwd(config), env=dict(config.env), start_new_session=True,
                        preexec_fn=default_signals(enter))
            except subprocess.SubprocessError as err:
                os.close(errors_write)
                errors_write = -1
                raise _failed(errors_read, err) from None
        finally:
            os.close(errors_read)
            if errors_write >= 0:
                os.close(errors_write)
        return self._started(popen, popen.stdin, cgroup)

    def _start_on_terminal(self, config: ContainerConfig, enter: Callable[[], None] | None,
                           cgroup: ContainerCgroup | None) -> ContainerHandle:
        """`tty: true`: the container runs on a terminal the kubelet holds (SB4)."""
        terminal = Terminal(config.log_path)
        try:
            popen = subprocess.Popen(
                _command(config), stdin=terminal.slave, stdout=terminal.slave,
                stderr=terminal.slave, cwd=_cwd(config),
                env={"TERM": "xterm", **config.env},
                start_new_session=True,
                preexec_fn=terminal.child_setup(default_signals(enter)))
        except BaseException:
            os.close(terminal.slave)
            terminal.close()
            raise
        return self._started(popen, os.fdopen(terminal.started(), "wb", buffering=0), cgroup)

    def _started(self, popen: subprocess.Popen[bytes], stdin: IO[bytes] | None,
                 cgroup: ContainerCgroup | None) -> ContainerHandle:
        stat = read_stat(popen.pid)
        self._children[popen.pid] = popen
        handle = ContainerHandle(
            id=f"process://{popen.pid}", pid=popen.pid, pgid=popen.pid,
            start_ticks=stat.start_ticks if stat else 0, started_at=time.time(),
            exited=asyncio.get_running_loop().create_future(), stdin=stdin)
        self._watch(handle, cgroup)
        return handle

    def adopt(self, *, pid: int, pgid: int, start_ticks: int,
              started_at: float) -> ContainerHandle | None:
        stat = read_stat(pid)
        if stat is None or not stat.alive or stat.start_ticks != start_ticks:
            return None
        handle = ContainerHandle(id=f"process://{pid}", pid=pid, pgid=pgid,
                                 start_ticks=start_ticks, started_at=started_at,
                                 exited=asyncio.get_running_loop().create_future())
        self._watch(handle)
        return handle

    def _watch(self, handle: ContainerHandle, cgroup: ContainerCgroup | None = None) -> None:
        """Resolve `handle.exited` when the process exits; with the attempt's `cgroup`,
        first record whether the OOM killer ended it (AU8)."""
        loop = asyncio.get_running_loop()

        def exited(code: int | None) -> None:
            if cgroup is not None and code is not None:
                handle.oom_killed = cgroup.oom_killed(
                    exit_code=code, kubelet_killed=signals.SIGKILL in handle.signals_sent)
            handle.exited.set_result(code)

        try:
            fd = os.pidfd_open(handle.pid)
        except ProcessLookupError:
            exited(self._reap(handle.pid))
            return

        def on_exit() -> None:
            code = self._reap(handle.pid)
            if code is None and handle.pid in self._children:
                return  # not reapable yet; pidfd stays readable, we are called again
            loop.remove_reader(fd)
            os.close(fd)
            if handle.stdin is not None:
                with contextlib.suppress(OSError):
                    handle.stdin.close()
            if not handle.exited.done():
                exited(code)

        loop.add_reader(fd, on_exit)

    def _reap(self, pid: int) -> int | None:
        popen = self._children.get(pid)
        if popen is None:
            return None  # not our child (re-adopted): its exit code is unknown
        code = popen.poll()
        if code is not None:
            del self._children[pid]
        return _exit_code(code)

    def _group(self, handle: ContainerHandle) -> list[ProcStat]:
        return container_group(handle.pid, handle.pgid, handle.start_ticks)

    def signal(self, handle: ContainerHandle, sig: int) -> None:
        handle.signals_sent.append(sig)
        if handle.exited.done() and not self._group(handle):
            return  # nothing of the container is left; the number may be another's now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(handle.pgid, sig)

    def gone(self, handle: ContainerHandle) -> bool:
        return handle.exited.done() and not self._group(handle)

    async def exec(self, handle: ContainerHandle | None, config: ContainerConfig,
                   command: list[str], *, timeout: float) -> ExecResult:
        env = dict(config.env)
        running = handle is not None and handle.running
        kwargs: dict[str, Any] = {"start_new_session": True}
        if handle is not None and running:
            kwargs = {"process_group": handle.pgid}
        # In a running container: its own namespaces and root (an exec probe sees what
        # the container sees); otherwise a fresh root like the container's.
        pid = handle.pid if handle is not None and running else None
        cwd = _cwd(config)
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                    preexec_fn=default_signals(child_setup(config, pid=pid)), **kwargs)
            except (PermissionError, subprocess.SubprocessError):
                # The container's group cannot be joined (another session): run in a
                # session of its own, still in the container's namespaces and root.
                proc = await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True,
                    preexec_fn=default_signals(child_setup(config, pid=pid)))
        except (OSError, subprocess.SubprocessError) as err:
            return ExecResult(exit_code=126, output=f"exec {command!r} failed: {err}")
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see skiff.tasks
                out, _ = await proc.communicate()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return ExecResult(exit_code=137, output="", timed_out=True)
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
            raise
        return ExecResult(exit_code=_exit_code(proc.returncode) or 0,
                          output=out.decode(errors="replace"))

    def memory_bytes(self, handle: ContainerHandle) -> int:
        return sum(m.rss_bytes for m in self._group(handle))


def signal_number(name: str | None, default: int = signals.SIGTERM) -> int:
    """`SIGTERM`/`TERM`/`15` → 15 (a container's `lifecycle.stopSignal`)."""
    if not name:
        return default
    text = str(name).upper()
    if text.isdigit():
        return int(text)
    if not text.startswith("SIG"):
        text = "SIG" + text
    return int(getattr(signals, text, default))


def pod_dir_for(root: Path, uid: str) -> Path:
    return root / "pods" / uid
