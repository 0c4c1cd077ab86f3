"""The kubelet's log service (what `skiff logs` calls): `/skiff.v1.Kubelet/Logs`.

Served on the kubelet's health port beside gRPC health. A msgpack request
`{"namespace", "name", "container", "tailLines", "previous"}` answers `{"text": str}` from
the container's log file (`previous` = the attempt before the current one); an unknown pod
or container is NotFound, carried as an `ApiError` exactly like the apiserver's errors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import from_grpc, to_grpc

__all__ = ["LOGS_METHOD", "LogService", "fetch_logs", "read_log"]

SERVICE = "skiff.v1.Kubelet"
LOGS_METHOD = f"/{SERVICE}/Logs"

# (namespace, name, container | None, previous) → the log file, or ApiError(NotFound).
LogLocator = Callable[[str, str, str | None, bool], Path]


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
        last: ApiError | None = None
        for locator in self.locators:
            try:
                return locator(namespace, name, container, previous)
            except ApiError as err:
                last = err
        raise last or ApiError(Reason.NOT_FOUND,
                               f'pod "{name}" in namespace "{namespace}" is not on this node')

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

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Logs": grpc.unary_unary_rpc_method_handler(self._logs)})


async def fetch_logs(target: str, namespace: str, name: str, container: str | None = None,
                     tail_lines: int | None = None, previous: bool = False) -> str:
    """Ask the kubelet at `target` (host:port of its health port) for a container's log."""
    request: dict[str, Any] = {"namespace": namespace, "name": name, "container": container,
                               "tailLines": tail_lines, "previous": previous}
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(LOGS_METHOD)
        try:
            data = await call(encode(request), timeout=30)
        except grpc.aio.AioRpcError as err:
            error = from_grpc(err, target=target)
            if error.reason == Reason.SERVICE_UNAVAILABLE:
                error = ApiError(Reason.SERVICE_UNAVAILABLE,
                                 f"the kubelet at {target} is unavailable ({err.details()}); "
                                 "is the node's kubelet running?")
            raise error from None
    return str(decode_map(data).get("text", ""))
