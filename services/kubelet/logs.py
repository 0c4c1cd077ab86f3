"""The kubelet's log service (what `skiff logs` calls): `/skiff.v1.Kubelet/Logs`.

Served on the kubelet's health port beside gRPC health. A msgpack request
`{"namespace", "name", "container", "tailLines", "previous"}` answers `{"text": str}` from
the container's log file (`previous` = the attempt before the current one); an unknown pod
or container is NotFound, carried as an `ApiError` exactly like the apiserver's errors.
`/skiff.v1.Kubelet/LogsFollow` streams `{"text"}` pieces: the log so far, then what the
container writes, until it exits (no process holds its log file any more, or it was
restarted into a new attempt, or the pod is gone) or the caller cancels. The client side
is `skiff.client.logs`.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc

from skiff.api.errors import ApiError
from skiff.client.logs import LOGS_METHOD, SERVICE, fetch_logs
from skiff.kubelet.locate import first_located
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import to_grpc

__all__ = ["LOGS_METHOD", "LogService", "fetch_logs", "follow_log", "read_log"]

FOLLOW_POLL_SECONDS = 0.2

# (namespace, name, container | None, previous) → the log file, or ApiError(NotFound).
LogLocator = Callable[[str, str, str | None, bool], Path]


def _is_written(path: Path) -> bool:
    """Whether any other process (the container) still holds the log file open: the
    kernel's view, so it needs no word from the pod worker. The kubelet's own descriptors
    (followers reading the file) do not count."""
    try:
        target = os.stat(path)
    except FileNotFoundError:
        return False
    me = str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == me:
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    st = os.stat(fd)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    return True
        except OSError:
            continue
    return False


async def follow_log(path: Path, still_current: Callable[[], bool], *,
                     tail_lines: int | None = None,
                     poll_seconds: float = FOLLOW_POLL_SECONDS) -> AsyncIterator[str]:
    """The log so far, then each new piece, until the writer is gone and all is read."""
    while not path.exists():
        if not still_current():
            return
        await asyncio.sleep(poll_seconds)
    first = read_log(path, tail_lines=tail_lines) if tail_lines is not None else None
    with open(path, "rb") as f:
        if first is not None:
            f.seek(0, os.SEEK_END)
            if first:
                yield first
        while True:
            done = not _is_written(path) or not still_current()
            data = f.read()
            if data:
                yield data.decode(errors="replace")
            elif done:
                return
            else:
                await asyncio.sleep(poll_seconds)


def read_log(path: Path, *, tail_lines: int | None = None) -> str:
    try:
        with open(path, errors="replace") as f:
            if tail_lines is None:
                return f.read()
            return "".join(deque(f, maxlen=max(0, tail_lines)))
    except FileNotFoundError:
        return ""


class LogService:
    """Register with `run_service(handlers=[svc.handler()])`; set `locators` when ready."""

    def __init__(self) -> None:
        self.locators: list[LogLocator] = []

    def locate(self, namespace: str, name: str, container: str | None,
               previous: bool) -> Path:
        return first_located(self.locators, namespace, name, container, previous)

    async def _logs(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            try:
                req = decode_map(request)
            except CodecError as err:
                raise ApiError.bad_request(str(err)) from None
            tail = req.get("tailLines")
            path = self.locate(str(req.get("namespace") or "default"), str(req.get("name")),
                               req.get("container") or None, bool(req.get("previous")))
            return encode({"text": read_log(path, tail_lines=int(tail) if tail is not None
                                            else None)})
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            raise AssertionError("unreachable") from None

    async def _follow(self, request: bytes,
                      context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            try:
                req = decode_map(request)
            except CodecError as err:
                raise ApiError.bad_request(str(err)) from None
            tail = req.get("tailLines")
            where = (str(req.get("namespace") or "default"), str(req.get("name")),
                     req.get("container") or None)
            path = self.locate(*where, False)

            def still_current() -> bool:
                try:
                    return self.locate(*where, False) == path
                except ApiError:
                    return False

            async for text in follow_log(path, still_current,
                                         tail_lines=int(tail) if tail is not None else None):
                yield encode({"text": text})
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Logs": grpc.unary_unary_rpc_method_handler(self._logs),
            "LogsFollow": grpc.unary_stream_rpc_method_handler(self._follow)})
