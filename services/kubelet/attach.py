"""The kubelet's end of pods/attach (SPEC SB4): a running container's stdin and output.

A container's output goes to its log file (a `tty: true` container's terminal output is
copied there by the kubelet, see runtime/terminal.py), so an attach session follows that
file from where it ends when the session starts, as `kubectl attach` shows output from now
on. Input goes to the container's stdin, kept open by the runtime for containers with
`stdin: true`; with `stdinOnce: true` the container's stdin closes when the session that
attached first closes it (kubectl sends that when its own stdin ends). The session ends
when the container exits (its last output sent first) or the caller leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import termios
from collections.abc import AsyncIterator, Callable
from typing import IO

from skiff.kubelet.runtime import ContainerConfig, ContainerHandle
from skiff.rpc.codec import decoded_maps, encode

__all__ = ["AttachLocator", "attach_stream"]

# (namespace, pod name, container or None) → the running container's config and handle
AttachLocator = Callable[[str, str, str | None], tuple[ContainerConfig, ContainerHandle]]

_CHUNK = 32 * 1024
POLL_SECONDS = 0.05


async def _write_stdin(handle: ContainerHandle, data: bytes) -> None:
    pipe = handle.stdin
    if pipe is None or pipe.closed:
        return
    with contextlib.suppress(OSError, ValueError):
        await asyncio.to_thread(os.write, pipe.fileno(), data)


async def attach_stream(config: ContainerConfig, handle: ContainerHandle,
                        requests: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The Exec call's answers for an attach session (`started`, output, `exit`)."""
    log: IO[bytes] | None = None
    with contextlib.suppress(OSError):
        log = open(config.log_path, "rb")  # noqa: SIM115 - closed in finally
        log.seek(0, os.SEEK_END)

    async def pump_input() -> None:
        async for msg in decoded_maps(requests):
            if msg.get("stdin"):
                await _write_stdin(handle, bytes(msg["stdin"]))
            if msg.get("stdinClose") and config.stdin_once and handle.stdin is not None:
                if config.tty:  # end of input on a terminal
                    await _write_stdin(handle, b"\x04")
                else:
                    with contextlib.suppress(OSError):
                        handle.stdin.close()
            if "resize" in msg and config.tty and handle.stdin is not None:
                width, height = msg["resize"]
                with contextlib.suppress(OSError, ValueError):
                    fcntl.ioctl(handle.stdin.fileno(), termios.TIOCSWINSZ,
                                struct.pack("HHHH", int(height), int(width), 0, 0))

    pump = asyncio.create_task(pump_input())
    try:
        yield encode({"started": True})
        while True:
            exited = handle.exited.done()  # read before the file: no output is lost
            data = log.read(_CHUNK) if log is not None else b""
            if data:
                yield encode({"stream": 1, "data": data})
                continue
            if exited:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_SECONDS):  # not wait_for: see skiff.tasks
                    await asyncio.shield(handle.exited)
        yield encode({"exit": 0})  # attach reports no exit code (the pod status has it)
    finally:
        pump.cancel()
        if log is not None:
            log.close()
