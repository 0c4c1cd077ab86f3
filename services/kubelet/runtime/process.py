"""The default runtime: a container is `command` + `args` run as a local OS process.

Each container gets its own session and process group (so SIGTERM/SIGKILL reach every
process it forked), its stdout and stderr appended to a log file, and a pidfd so its exit
wakes the event loop without polling. The image is not pulled or used: it is recorded in the
status only. A container started by an earlier kubelet is re-adopted by PID after checking
its start time in /proc, so a reused PID is never mistaken for it (GT8).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from skiff.kubelet.runtime import ContainerConfig, ContainerHandle, ExecResult
from skiff.kubelet.runtime.terminal import Terminal
from skiff.procfs import ProcStat, container_group, read_stat

__all__ = ["ProcessRuntime", "base_environment"]

log = logging.getLogger(__name__)

_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")


def base_environment() -> dict[str, str]:
    """What every container inherits from the node (a process needs PATH to find `sleep`)."""
    return {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}


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


def _child_setup(config: ContainerConfig) -> Callable[[], None] | None:
    """After the signals: join the container's cgroup (AU8), then enter the sandbox."""
    join, enter = config.join_cgroup, config.sandbox.enter if config.sandbox else None
    if join is None or enter is None:
        return join or enter

    def both() -> None:
        join()
        enter()
    return both


class ProcessRuntime:
    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    async def start(self, config: ContainerConfig) -> ContainerHandle:
        if not config.command:
            raise OSError(f"container {config.name!r} has no command: Skiff runs "
                          "`command` + `args` as a process (the image is not run)")
        config.log_path.parent.mkdir(parents=True, exist_ok=True)
        enter = _child_setup(config)
        if config.tty:
            return self._start_on_terminal(config, enter)
        with open(config.log_path, "ab") as logf:
            popen = subprocess.Popen(
                config.command, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if config.stdin else subprocess.DEVNULL,
                cwd=str(config.working_dir),
                env={**base_environment(), **config.env}, start_new_session=True,
                preexec_fn=default_signals(enter))
        return self._started(popen, popen.stdin)

    def _start_on_terminal(self, config: ContainerConfig,
                           enter: Callable[[], None] | None) -> ContainerHandle:
        """`tty: true`: the container runs on a terminal the kubelet holds (SB4)."""
        terminal = Terminal(config.log_path)
        try:
            popen = subprocess.Popen(
                config.command, stdin=terminal.slave, stdout=terminal.slave,
                stderr=terminal.slave, cwd=str(config.working_dir),
                env={"TERM": "xterm", **base_environment(), **config.env},
                start_new_session=True,
                preexec_fn=terminal.child_setup(default_signals(enter)))
        except BaseException:
            os.close(terminal.slave)
            terminal.close()
            raise
        return self._started(popen, os.fdopen(terminal.started(), "wb", buffering=0))

    def _started(self, popen: subprocess.Popen[bytes], stdin: IO[bytes] | None
                 ) -> ContainerHandle:
        stat = read_stat(popen.pid)
        self._children[popen.pid] = popen
        handle = ContainerHandle(
            id=f"process://{popen.pid}", pid=popen.pid, pgid=popen.pid,
            start_ticks=stat.start_ticks if stat else 0, started_at=time.time(),
            exited=asyncio.get_running_loop().create_future(), stdin=stdin)
        self._watch(handle)
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

    def _watch(self, handle: ContainerHandle) -> None:
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(handle.pid)
        except ProcessLookupError:
            handle.exited.set_result(self._reap(handle.pid))
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
                handle.exited.set_result(code)

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
        env = {**base_environment(), **config.env}
        kwargs: dict[str, object] = {"start_new_session": True}
        if handle is not None and handle.running:
            kwargs = {"process_group": handle.pgid}
        kwargs["preexec_fn"] = default_signals(_child_setup(config))
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, cwd=str(config.working_dir), env=env,
                    **kwargs)  # type: ignore[arg-type]
            except (PermissionError, subprocess.SubprocessError):
                # The container's group is gone (or cannot be joined): run on its own.
                proc = await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, cwd=str(config.working_dir), env=env,
                    start_new_session=True,
                    preexec_fn=default_signals(_child_setup(config)))
        except OSError as err:
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
