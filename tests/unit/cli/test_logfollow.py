"""Issue 10 defect 5 (CLI side): `skiff logs -f` reads the kubelet's streaming log call
(`/skiff.v1.Kubelet/LogsFollow`, msgpack `{"text"}` pieces) and knows a kubelet that does
not serve it (UNIMPLEMENTED) so it can fall back to polling. A loopback gRPC server plays
the kubelet."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from skiff.api import ApiError, Reason
from skiff.cli import logfollow
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import to_grpc


async def serve(handlers: dict[str, grpc.RpcMethodHandler]) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("skiff.v1.Kubelet", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_defect5_follow_yields_each_piece_the_kubelet_streams() -> None:
    requests = []

    async def follow(request: bytes, context: grpc.aio.ServicerContext
                     ) -> AsyncIterator[bytes]:
        requests.append(decode_map(request))
        for text in ("one\n", "tw", "o\n"):
            yield encode({"text": text})

    server, target = await serve({"LogsFollow": grpc.unary_stream_rpc_method_handler(follow)})
    try:
        pieces = [p async for p in logfollow.stream(target, "ns", "web", container="main",
                                                    tail_lines=5)]
    finally:
        await server.stop(None)
    assert pieces == ["one\n", "tw", "o\n"]
    assert requests == [{"namespace": "ns", "name": "web", "container": "main",
                         "tailLines": 5, "previous": False}]


async def test_defect5_a_kubelet_without_the_streaming_call_is_not_served() -> None:
    async def logs(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return encode({"text": ""})

    server, target = await serve({"Logs": grpc.unary_unary_rpc_method_handler(logs)})
    try:
        with pytest.raises(logfollow.NotServed):
            async for _ in logfollow.stream(target, "ns", "web", container=None,
                                            tail_lines=None):
                pass
    finally:
        await server.stop(None)


async def test_defect5_the_kubelets_not_found_reaches_the_user_as_an_api_error() -> None:
    async def follow(request: bytes, context: grpc.aio.ServicerContext
                     ) -> AsyncIterator[bytes]:
        code, details, trailer = to_grpc(ApiError(Reason.NOT_FOUND, 'pod "web" not found'))
        await context.abort(code, details, trailing_metadata=trailer)
        yield b""  # pragma: no cover - abort raised

    server, target = await serve({"LogsFollow": grpc.unary_stream_rpc_method_handler(follow)})
    try:
        with pytest.raises(ApiError) as err:
            async for _ in logfollow.stream(target, "ns", "web", container=None,
                                            tail_lines=None):
                pass
    finally:
        await server.stop(None)
    assert err.value.reason == Reason.NOT_FOUND
    assert 'pod "web" not found' in err.value.message
