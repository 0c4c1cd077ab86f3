"""A container's terminal (`tty: true`, SPEC SB4): a pseudo-terminal the kubelet holds.

The container's stdin, stdout and stderr are the terminal's slave side (its controlling
terminal, so a shell is interactive and Enter is a newline); the kubelet keeps the master
side, copies everything the container writes into the container's log file (where logs
and attach read it) and writes attached input to it. The terminal lives in the kubelet:
a kubelet restart hangs it up (the container gets SIGHUP), unlike a node whose runtime
shim holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import termios
from collections.abc import Callable
from pathlib import Path

__all__ = ["Terminal"]

_CHUNK = 32 * 1024


class Terminal:
    def __init__(self, log_path: Path) -> None:
        self.master, self.slave = os.openpty()
        self._log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._loop: asyncio.AbstractEventLoop | None = None

    def child_setup(self, then: Callable[[], None] | None) -> Callable[[], None]:
        """The preexec function: make the terminal the controlling one (after setsid)."""
        def setup() -> None:
            if then is not None:
                then()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        return setup

    def started(self) -> int:
        """The child runs: copy its output from now on; the fd attach writes to."""
        os.close(self.slave)
        self._loop = asyncio.get_running_loop()
        os.set_blocking(self.master, False)
        self._loop.add_reader(self.master, self._copy)
        return os.dup(self.master)

    def _copy(self) -> None:
        try:
            data = os.read(self.master, _CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the slave side is gone
            data = b""
        if data:
            self._log.write(data)
            return
        self.close()

    def close(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self.master)
            self._loop = None
        with contextlib.suppress(OSError):
            os.close(self.master)
        self._log.close()
