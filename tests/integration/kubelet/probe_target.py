"""A container process for probe tests: an HTTP server (`/healthz` 200, `/fail` 500) on
`--http PORT` and a gRPC health server reporting SERVING on `--grpc PORT`."""

from __future__ import annotations

import asyncio
import sys

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


async def handle_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readline()
    path = request.split()[1].decode() if len(request.split()) > 1 else "/"
    code = b"200 OK" if path == "/healthz" else b"500 Internal Server Error"
    writer.write(b"HTTP/1.1 " + code + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def main() -> None:
    http_port = int(sys.argv[sys.argv.index("--http") + 1])
    grpc_port = int(sys.argv[sys.argv.index("--grpc") + 1])
    server = await asyncio.start_server(handle_http, "0.0.0.0", http_port)
    rpc = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, rpc)
    rpc.add_insecure_port(f"0.0.0.0:{grpc_port}")
    await rpc.start()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
