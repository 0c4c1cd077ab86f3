"""Container logs from the kubelet that runs the pod (`skiff logs`, `kubectl logs [-f]`).

The kubelet serves `/skiff.v1.Kubelet/Logs` (the whole log, or its tail) and
`/skiff.v1.Kubelet/LogsFollow` (the same, then new lines as they are written, until the
container exits or the caller stops) on its health port, published in the Node's
`status.daemonEndpoints.kubeletEndpoint.Port`. Requests and answers are msgpack maps;
errors carry an `ApiError` like the apiserver's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.client.credentials import Credentials
from skiff.client.interface import Client
from skiff.client.kubelet import KubeletTarget, kubelet_channel
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import from_grpc

SERVICE = "skiff.v1.Kubelet"
LOGS_METHOD = f"/{SERVICE}/Logs"
LOGS_FOLLOW_METHOD = f"/{SERVICE}/LogsFollow"


def _request(namespace: str, name: str, container: str | None, tail_lines: int | None,
             previous: bool) -> bytes:
    request: dict[str, Any] = {"namespace": namespace, "name": name, "container": container,
                               "tailLines": tail_lines, "previous": previous}
    return encode(request)


def _unavailable(target: str, err: grpc.aio.AioRpcError) -> ApiError:
    error = from_grpc(err, target=target)
    if error.reason == Reason.SERVICE_UNAVAILABLE:
        error = ApiError(Reason.SERVICE_UNAVAILABLE,
                         f"the kubelet at {target} is unavailable ({err.details()}); "
                         "is the node's kubelet running?")
    return error


async def fetch_logs(target: str, namespace: str, name: str, container: str | None = None,
                     tail_lines: int | None = None, previous: bool = False, *,
                     credentials: Credentials | None = None) -> str:
    """Ask the kubelet at `target` (host:port of its port) for a container's log."""
    async with kubelet_channel(target, credentials) as channel:
        call = channel.unary_unary(LOGS_METHOD)
        try:
            data = await call(_request(namespace, name, container, tail_lines, previous),
                              timeout=30)
        except grpc.aio.AioRpcError as err:
            raise _unavailable(target, err) from None
    return str(decode_map(data).get("text", ""))


async def follow_logs(target: str, namespace: str, name: str, container: str | None = None,
                      tail_lines: int | None = None, *,
                      credentials: Credentials | None = None) -> AsyncIterator[str]:
    """The container's log, then each new piece as it is written, until the container
    exits (the iterator ends) or the caller stops iterating."""
    async with kubelet_channel(target, credentials) as channel:
        call = channel.unary_stream(LOGS_FOLLOW_METHOD)(
            _request(namespace, name, container, tail_lines, False))
        try:
            async for data in call:
                text = str(decode_map(data).get("text", ""))
                if text:
                    yield text
        except grpc.aio.AioRpcError as err:
            raise _unavailable(target, err) from None
        finally:
            call.cancel()


def kubelet_endpoint(node: dict[str, Any]) -> KubeletTarget:
    """host:port of the kubelet service (logs, exec, metrics) a Node publishes."""
    status = node.get("status", {})
    port = status.get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")
    address = next((a["address"] for a in status.get("addresses", [])
                    if a.get("type") == "InternalIP"), "127.0.0.1")
    if not port:
        name = node.get("metadata", {}).get("name", "")
        raise ApiError(Reason.SERVICE_UNAVAILABLE,
                       f'node "{name}" does not publish a kubelet endpoint')
    return KubeletTarget(f"{address}:{port}", node.get("metadata", {}).get("name", ""))


async def kubelet_target(api: Client, node_name: str) -> str:
    """host:port of the log service of the kubelet on `node_name`."""
    return kubelet_endpoint(await api.get("nodes", node_name))


async def pod_logs(api: Client, name: str, namespace: str | None = None, *,
                   container: str | None = None, tail_lines: int | None = None,
                   previous: bool = False, follow: bool = False) -> AsyncIterator[str]:
    """A pod's container log as text pieces: all of it (one piece), or with `follow=True`
    the log so far and then new output until the container exits or the caller stops."""
    namespace = namespace or "default"
    pod = await api.get("pods", name, namespace)
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        raise ApiError.bad_request(f'pod "{name}" is not scheduled to a node yet; no logs')
    target = await kubelet_target(api, node_name)
    if not follow:
        yield await fetch_logs(target, namespace, name, container, tail_lines, previous)
        return
    if previous:
        raise ApiError.bad_request("follow and previous cannot be combined: the previous "
                                   "container has exited")
    async for piece in follow_logs(target, namespace, name, container, tail_lines):
        yield piece
