"""`pods/log` through the apiserver (`kubectl logs`): the apiserver finds the pod's node
and reads the log from that kubelet's port, once or followed as a stream, honouring
`tailLines`, `limitBytes`, `container` and `previous`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from skiff.api import ApiError
from skiff.api.errors import FieldError as ApiFieldError
from skiff.apiserver.endpoints.handlers.queryparams import query_bool
from skiff.apiserver.endpoints.handlers.request import int_param
from skiff.apiserver.endpoints.http import Response
from skiff.apiserver.registry.store import Registry
from skiff.client import logs as kubelet_logs
from skiff.client.credentials import Credentials


async def pod_log(registry: Registry, namespace: str, name: str, q: dict[str, str], *,
                  kubelet: Credentials) -> Response:
    """`pods/log`: the container's log from its kubelet, whole or followed."""
    pod = await registry.get("pods", namespace, name)
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        raise ApiError.bad_request(f'pod "{name}" is not scheduled to a node yet')
    target = kubelet_logs.kubelet_endpoint(
        await registry.get("nodes", None, node_name))
    tail = q.get("tailLines")
    tail_lines = int_param("tailLines", tail) if tail else None
    container = q.get("container") or None
    limit = q.get("limitBytes")
    limit_bytes = int_param("limitBytes", limit) if limit else None
    if limit_bytes is not None and limit_bytes < 1:
        raise ApiError.invalid("PodLogOptions", name, [ApiFieldError(
            "limitBytes", "Invalid value", "must be greater than 0", limit_bytes)])
    if query_bool(q, "follow"):
        pieces = kubelet_logs.follow_logs(target, namespace, name, container=container,
                                          tail_lines=tail_lines, credentials=kubelet)
        # the first piece (or the kubelet's error) before the 200 goes out
        try:
            first = await anext(pieces)
        except StopAsyncIteration:
            first = ""

        async def stream() -> AsyncIterator[str | bytes]:
            left = limit_bytes  # --limit-bytes: the stream ends after that many

            def take(piece: str) -> str | bytes:
                nonlocal left
                if left is None:
                    return piece
                data = piece.encode()[:left]
                left -= len(data)
                return data

            try:
                if first:
                    yield take(first)
                async for piece in pieces:
                    if left is not None and left <= 0:
                        break
                    yield take(piece)
            finally:
                close = getattr(pieces, "aclose", None)
                if close is not None:
                    await close()

        return Response(200, stream=stream(), content_type="text/plain")
    text = await kubelet_logs.fetch_logs(target, namespace, name, container=container,
                                         tail_lines=tail_lines,
                                         previous=query_bool(q, "previous"),
                                         credentials=kubelet)
    if limit_bytes is not None:
        return Response(200, str(text).encode()[:limit_bytes], content_type="text/plain")
    return Response(200, str(text), content_type="text/plain")
