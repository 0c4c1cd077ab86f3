"""The kubelet's end of pods/exec (SPEC SB4): run a command inside a running container.

The exec'd process gets the container's environment and working directory, joins the
container's cgroup (AU8: it counts against the container's limits), and, in the child
before exec, the container's sandbox as exec probes do (`Sandbox.join`): its network, UTS
and mount namespaces (so its root), a Landlock domain confined to that root, then the
container's user and capabilities. With `tty`
it runs on a pseudo-terminal (resize sets its window size); otherwise stdout and stderr
are kept apart. The answer ends with the exit code (128 + signal when killed by one).

A terminal's first size is the caller's: kubectl sends it on the resize channel as soon as
the connection is upgraded, which is after the kubelet answers `started`. So with `tty`
the kubelet answers first and starts the command once that size has arrived (or after
`tty_size_wait`, for clients that never send one): `stty size` as the first thing a
command runs prints the caller's size, not 0 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from skiff.api.errors import ApiError
from skiff.client.streaming import SERVICE
from skiff.kubelet.attach import AttachLocator, attach_stream
from skiff.kubelet.locate import first_located
from skiff.kubelet.portforward import PortForwardService
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle
from skiff.kubelet.runtime.process import base_environment, child_setup, default_signals
from skiff.rpc.codec import CodecError, decode_map, decoded_maps, encode
from skiff.rpc.errors import to_grpc

__all__ = ["ExecLocator", "ExecService"]

log = logging.getLogger(__name__)

# (namespace, pod name, container or None) → the running container's start config and PID
ExecLocator = Callable[[str, str, str | None], tuple[ContainerConfig, int | None]]

_CHUNK = 32 * 1024
TTY_SIZE_WAIT = 1.0  # seconds a tty exec waits for the caller's terminal size


def _set_window(fd: int, width: int, height: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


_TIOCSPTLCK = 0x40045431  # (un)lock a pseudo-terminal's slave side
_TIOCGPTPEER = 0x5441  # open a pseudo-terminal master's slave side (Linux 4.13+)


def _open_pty(pid: int | None) -> tuple[int, int]:
    """A pseudo-terminal for a tty exec: in a container with its own root (AU8), one of
    the container's devpts (reached through /proc/<pid>/root as root), so `tty` inside
    names it; otherwise the node's."""
    if pid is None:
        return os.openpty()
    master = os.open(f"/proc/{pid}/root/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.ioctl(master, _TIOCSPTLCK, struct.pack("i", 0))
        slave = fcntl.ioctl(master, _TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        os.close(master)
        raise
    return master, slave


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class ExecService:
    """Register with `run_service(handlers=[svc.handler()])`; set `locators` when ready."""

    def __init__(self, *, tty_size_wait: float = TTY_SIZE_WAIT) -> None:
        self.tty_size_wait = tty_size_wait
        self.locators: list[ExecLocator] = []
        self.forwards = PortForwardService()  # pods/portforward, on the same port
        self.attach_locators: list[AttachLocator] = []  # pods/attach

    def locate(self, namespace: str, name: str, container: str | None
               ) -> tuple[ContainerConfig, int | None]:
        return first_located(self.locators, namespace, name, container)

    def _locate_attach(self, namespace: str, name: str, container: str | None
                       ) -> tuple[ContainerConfig, ContainerHandle]:
        return first_located(self.attach_locators, namespace, name, container)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Exec": grpc.stream_stream_rpc_method_handler(self._exec)})

    async def _exec(self, requests: AsyncIterator[bytes],
                    context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            try:
                first = decode_map(await anext(aiter(requests)))
            except (CodecError, StopAsyncIteration):
                raise ApiError.bad_request("exec: the first message must be the request") \
                    from None
            command = [str(c) for c in first.get("command") or []]
            if first.get("attach"):
                attached = self._locate_attach(str(first.get("namespace") or "default"),
                                               str(first.get("name")),
                                               first.get("container") or None)
            elif not command:
                raise ApiError.bad_request("you must specify at least one command for the "
                                           "container")
            config, pid = self.locate(str(first.get("namespace") or "default"),
                                 str(first.get("name")), first.get("container") or None)
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            return
        if first.get("check"):  # only whether the container can be exec'd into
            yield encode({"checked": True})
            return
        if first.get("attach"):
            async for message in attach_stream(*attached, requests):
                yield message
            return
        # AU8: in the child before exec, as for exec probes and hooks: the container's
        # cgroup, namespaces, root and working directory, a Landlock domain confined to
        # that root, then its user and capabilities
        setup = child_setup(config, pid=pid)
        own_root = config.sandbox is not None and config.sandbox.root is not None
        async for message in self._run(config, command, requests,
                                       stdin=bool(first.get("stdin")),
                                       tty=bool(first.get("tty")),
                                       pty_pid=pid if own_root else None, setup=setup):
            yield message

    async def _run(self, config: ContainerConfig, command: list[str],
                   requests: AsyncIterator[bytes], *, stdin: bool,
                   tty: bool, pty_pid: int | None = None,
                   setup: Callable[[], None] | None = None) -> AsyncIterator[bytes]:
        env = {**base_environment(), **config.env}
        # AU8: in a container's own root, `setup` changes to its working directory
        cwd = None if config.sandbox is not None and config.sandbox.root is not None else str(
            config.working_dir)
        if tty:
            env.setdefault("TERM", "xterm")
        master = -1
        out_queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        in_queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        # Every request message goes through one queue, in order; the first resize also
        # settles `first_size`, which a tty command waits for before it starts.
        first_size: asyncio.Future[tuple[int, int]] = loop.create_future()

        async def read_input() -> None:
            try:
                async for msg in decoded_maps(requests):
                    if "resize" in msg and not first_size.done():
                        width, height = msg["resize"]
                        first_size.set_result((int(width), int(height)))
                    in_queue.put_nowait(msg)
            except grpc.RpcError as err:
                log.debug("exec input ended: %s", err)
            finally:
                in_queue.put_nowait(None)

        reader = asyncio.create_task(read_input())
        try:
            size: tuple[int, int] | None = None
            if tty:
                yield encode({"started": True})  # the apiserver upgrades; kubectl: a size
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.tty_size_wait):  # see skiff.tasks
                        size = await asyncio.shield(first_size)
            else:
                # The upgrade first, then the command, as the CRI streaming server does: a
                # command that writes at once (an error on stderr) must not race kubectl
                # 1.32's stream set-up, which drops frames that come before it
                yield encode({"started": True})
            try:
                if tty:
                    master, slave = _open_pty(pty_pid)
                    if size is not None:
                        _set_window(master, *size)

                    proc = subprocess.Popen(
                        ["setsid", "--ctty", *command], stdin=slave, stdout=slave,
                        stderr=slave, cwd=cwd, env=env,
                        preexec_fn=default_signals(setup))
                    os.close(slave)
                else:
                    proc = subprocess.Popen(
                        command, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        cwd=cwd, env=env, start_new_session=True,
                        preexec_fn=default_signals(setup))
            except (OSError, subprocess.SubprocessError) as err:
                # a failed `setup` (the container went away under it) is a SubprocessError
                reason = getattr(err, "strerror", None) or "cannot enter the container"
                yield encode({"stream": 2, "data": f"exec: {command[0]}: {reason}\n"
                              .encode()})
                yield encode({"exit": 126 if not isinstance(err, FileNotFoundError) else 127})
                return

            readers: list[tuple[int, int]] = []  # (fd, stream number)
            if tty:
                readers.append((master, 1))
            else:
                assert proc.stdout is not None and proc.stderr is not None
                readers += [(proc.stdout.fileno(), 1), (proc.stderr.fileno(), 2)]
            open_readers = {fd for fd, _ in readers}

            def on_readable(fd: int, stream: int) -> None:
                try:
                    data = os.read(fd, _CHUNK)
                except OSError:
                    data = b""
                if data:
                    out_queue.put_nowait(encode({"stream": stream, "data": data}))
                    return
                loop.remove_reader(fd)
                open_readers.discard(fd)
                if not open_readers:
                    out_queue.put_nowait(None)

            for fd, stream in readers:
                os.set_blocking(fd, False)
                loop.add_reader(fd, on_readable, fd, stream)
            stdin_fd = master if tty else (proc.stdin.fileno() if proc.stdin else -1)

            async def pump_input() -> None:
                while (msg := await in_queue.get()) is not None:
                    if "stdin" in msg and stdin_fd >= 0:
                        data = bytes(msg["stdin"])
                        while data:
                            try:
                                data = data[os.write(stdin_fd, data):]
                            except BlockingIOError:
                                await asyncio.sleep(0.01)
                            except OSError:
                                break
                    if msg.get("stdinClose"):
                        if tty:
                            with contextlib.suppress(OSError):
                                os.write(master, b"\x04")
                        elif proc.stdin is not None:
                            with contextlib.suppress(OSError):
                                proc.stdin.close()
                    if "resize" in msg and tty:
                        width, height = msg["resize"]
                        _set_window(master, int(width), int(height))

            pump = asyncio.create_task(pump_input())
            try:
                while True:
                    item = await out_queue.get()
                    if item is None:
                        break
                    yield item
                returncode = await asyncio.to_thread(proc.wait)
                yield encode({"exit": _exit_code(returncode)})
            finally:
                pump.cancel()
                for fd, _ in readers:
                    loop.remove_reader(fd)
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, 9)
                    await asyncio.to_thread(proc.wait)
                if master >= 0:
                    with contextlib.suppress(OSError):
                        os.close(master)
                for f in (proc.stdin, proc.stdout, proc.stderr):
                    if f is not None:
                        with contextlib.suppress(OSError):
                            f.close()
        finally:
            reader.cancel()
