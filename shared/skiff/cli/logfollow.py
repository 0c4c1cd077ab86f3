"""`skiff logs -f`: a container's log, then what it writes, until it exits or Ctrl-C.

The kubelet streams a followed log with `/skiff.v1.Kubelet/LogsFollow` (same msgpack request
as `/skiff.v1.Kubelet/Logs`, answers a stream of `{"text"}` pieces and ends when the
container exits). A kubelet that does not serve it (UNIMPLEMENTED) is followed by polling
instead: the whole log each `interval`, printing what is new, until the pod's status says
the container is no longer running (the log is read once more after that, so nothing it
wrote before exiting is lost).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import grpc

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import from_grpc

__all__ = ["LOGS_FOLLOW_METHOD", "NotServed", "poll", "stream"]

LOGS_FOLLOW_METHOD = "/skiff.v1.Kubelet/LogsFollow"

Obj = dict[str, Any]


class NotServed(Exception):
    """The kubelet has no streaming log call (an older kubelet)."""


class FetchLogs(Protocol):
    def __call__(self, target: str, namespace: str, name: str, container: str | None = None,
                 tail_lines: int | None = None, previous: bool = False) -> Awaitable[str]: ...


def _error(target: str, err: grpc.aio.AioRpcError) -> ApiError:
    error = from_grpc(err, target=target)
    if error.reason == Reason.SERVICE_UNAVAILABLE:
        return ApiError(Reason.SERVICE_UNAVAILABLE,
                        f"the kubelet at {target} is unavailable ({err.details()}); is the "
                        "node's kubelet running?")
    return error


async def stream(target: str, namespace: str, name: str, *, container: str | None,
                 tail_lines: int | None) -> AsyncIterator[str]:
    """The pieces of the log the kubelet at `target` streams; NotServed if it cannot."""
    request = {"namespace": namespace, "name": name, "container": container,
               "tailLines": tail_lines, "previous": False}
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_stream(LOGS_FOLLOW_METHOD)(encode(request))
        received = False
        try:
            async for data in call:
                received = True
                text = str(decode_map(data).get("text", ""))
                if text:
                    yield text
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED and not received:
                raise NotServed() from None
            raise _error(target, err) from None
        finally:
            call.cancel()


def _container_name(pod: Obj, container: str | None) -> str:
    if container:
        return container
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name", ""))


async def _container_state(api: ApiClient, pod: Obj, container: str) -> Obj | None:
    """The container's status now, or None once the pod is gone (or was replaced)."""
    meta = pod["metadata"]
    try:
        current = await api.get("pods", meta["name"], meta["namespace"])
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise
    if current["metadata"].get("uid") != meta.get("uid"):
        return None
    statuses = (current.get("status") or {}).get("containerStatuses") or []
    return next((dict(s) for s in statuses if s.get("name") == container), {})


def _tail(text: str, lines: int | None) -> str:
    if lines is None:
        return text
    return "".join(deque(text.splitlines(keepends=True), maxlen=max(0, lines)))


async def poll(api: ApiClient, fetch: FetchLogs, target: str, pod: Obj, *,
               container: str | None, tail_lines: int | None, write: Callable[[str], None],
               interval: float) -> None:
    """Follow by polling: print new log text until the container stops running."""
    meta = pod["metadata"]
    name = _container_name(pod, container)
    offset: int | None = None
    seen_running = False
    restarts: int | None = None
    while True:
        status = await _container_state(api, pod, name)
        text = await fetch(target, meta["namespace"], meta["name"], container=container)
        if offset is None:
            write(_tail(text, tail_lines))
        elif len(text) >= offset:
            write(text[offset:])
        offset = len(text)
        if status is None:
            return
        state = status.get("state") or {}
        count = int(status.get("restartCount") or 0)
        restarts = count if restarts is None else restarts
        seen_running = seen_running or "running" in state
        if "terminated" in state or count != restarts or (
                seen_running and "running" not in state):
            return
        await asyncio.sleep(interval)
