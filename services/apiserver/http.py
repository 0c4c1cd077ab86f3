"""A small asyncio HTTP/1.1 server for the Kubernetes-compatible front (kubectl).

Just what kubectl needs: keep-alive connections, request bodies by Content-Length,
responses by Content-Length, and chunked streaming for watches. No new dependency; the
routing and Kubernetes semantics live in `kubeapi`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
REASONS = {200: "OK", 201: "Created", 202: "Accepted", 400: "Bad Request", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
           409: "Conflict", 410: "Gone", 413: "Request Entity Too Large",
           415: "Unsupported Media Type", 422: "Unprocessable Entity",
           429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable", 504: "Gateway Timeout"}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass
class Response:
    status: int = 200
    body: Any = None  # JSON-able, or bytes/str with content_type
    content_type: str = "application/json"
    stream: AsyncIterator[Any] | None = None  # watch: each item one JSON line
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class HttpServer:
    def __init__(self, handler: Handler, *, host: str, port: int) -> None:
        self._handler = handler
        self._host, self._port = host, port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self._host, self._port,
                                                  reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                response = await self._handler(request)
                keep = await _write_response(writer, response)
                if not keep or request.header("connection").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        except _BadRequest as err:
            with contextlib.suppress(Exception):
                await _write_response(writer, Response(400, {"kind": "Status",
                                                             "message": str(err)}))
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()


class _BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    try:
        method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    except ValueError:
        raise _BadRequest("malformed request line") from None
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY:
        raise _BadRequest(f"request body is {length} bytes; the limit is {MAX_BODY}")
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    return Request(method.upper(), unquote(url.path), query, headers, body)


async def _write_response(writer: asyncio.StreamWriter, response: Response) -> bool:
    status_line = f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'OK')}\r\n"
    headers = {"Content-Type": response.content_type, "Cache-Control": "no-cache, private",
               **response.headers}
    if response.stream is not None:
        headers["Transfer-Encoding"] = "chunked"
        writer.write((status_line + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                      + "\r\n").encode("latin-1"))
        await writer.drain()
        try:
            async for item in response.stream:
                data = json.dumps(item).encode() + b"\n"
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        return False
    if isinstance(response.body, bytes):
        data = response.body
    elif isinstance(response.body, str):
        data = response.body.encode()
    else:
        data = json.dumps(response.body).encode()
    headers["Content-Length"] = str(len(data))
    writer.write((status_line + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                  + "\r\n").encode("latin-1") + data)
    await writer.drain()
    return True
