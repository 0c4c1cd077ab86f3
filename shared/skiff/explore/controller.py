"""The controller under test as explore runs it: an unmodified program started from the
user's command line (no shell: the process explore starts is the controller, so a crash
perturbation's pid target is it), its output appended to one log per run, and restarted
when it dies — at once after a SIGKILL (the crash a test injects, as a supervisor or a
pod's restartPolicy would), with a growing delay after an exit of its own, which is
recorded: a controller that exits by itself in a test run but not in the reference run is
a finding.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Controller", "Exit", "command_line"]

RESTART_DELAY = 0.2
MAX_DELAY = 5.0


@dataclass(frozen=True)
class Exit:
    time: float
    code: int  # negative: killed by that signal
    tail: str  # the last lines it printed

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL

    def text(self) -> str:
        how = f"killed by signal {-self.code}" if self.code < 0 else f"exited with code " \
                                                                      f"{self.code}"
        return f"the controller {how}" + (f"; its last output:\n{self.tail}"
                                          if self.tail else "")


def command_line(template: str, *, namespace: str, kubeconfig: Path) -> list[str]:
    """The user's `--controller` command, split as a shell would split it, with
    `{namespace}` and `{kubeconfig}` filled in."""
    try:
        argv = shlex.split(template)
    except ValueError as err:
        raise ValueError(f"--controller: cannot split the command line ({err})") from None
    if not argv:
        raise ValueError("--controller: the command is empty")
    return [a.replace("{namespace}", namespace).replace("{kubeconfig}", str(kubeconfig))
            for a in argv]


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Controller:
    argv: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path | None = None
    exits: list[Exit] = field(default_factory=list)
    _proc: asyncio.subprocess.Process | None = None
    _task: asyncio.Task[None] | None = None
    _stopping: bool = False

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    async def start(self) -> None:
        await self._spawn()
        self._task = asyncio.get_running_loop().create_task(self._supervise(),
                                                             name="explore-controller")

    async def _spawn(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"--- started {time.strftime('%H:%M:%S')}: "
                      f"{shlex.join(self.argv)}\n".encode())
            out.flush()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.argv, stdout=out, stderr=asyncio.subprocess.STDOUT,
                    stdin=asyncio.subprocess.DEVNULL, env={**os.environ, **self.env},
                    cwd=self.cwd, start_new_session=True)
            except OSError as err:
                raise ValueError(f"--controller: cannot start {self.argv[0]!r}: "
                                 f"{err.strerror}") from None

    async def _supervise(self) -> None:
        delay = RESTART_DELAY
        while True:
            assert self._proc is not None
            code = await self._proc.wait()
            if self._stopping:
                return
            gone = Exit(time.time(), code, "" if code == -signal.SIGKILL else _tail(self.log))
            self.exits.append(gone)
            if gone.killed:
                delay = RESTART_DELAY
            await asyncio.sleep(delay)
            if not gone.killed:
                delay = min(delay * 2 + 0.5, MAX_DELAY)
            if self._stopping:
                return
            with open(self.log, "ab") as out:
                out.write(f"--- {gone.text().splitlines()[0]}; restarting\n".encode())
            await self._spawn()

    async def stop(self) -> None:
        """SIGKILL its process group (whatever it started) and stop restarting it."""
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
