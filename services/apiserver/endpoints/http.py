"""The HTTP server of the Kubernetes-compatible front (kubectl), on aiohttp.

aiohttp owns HTTP itself: request framing (Content-Length and chunked bodies), keep-alive,
malformed input, and streamed responses (watch, `logs -f`); it also gives the WebSocket
and TLS support later features need. This module only adapts aiohttp's request to the small
`Request` / `Response` pair that `kubeapi` routes, and answers a body over the limit with
Kubernetes' 413 `RequestEntityTooLarge` Status.

It also bounds what a client can hold before its request is even read (SPEC AU10): a
connection whose request head (request line and headers) is not complete within
`header_timeout` seconds is closed, as kube-apiserver's ReadHeaderTimeout (32 s) does, and a
request line or header over the limit gets a `Status` (414 / 431), never aiohttp's text
with the offending bytes in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web, web_protocol
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from skiff.api import ApiError, Reason
from skiff.apiserver.auth.context import current_user
from skiff.auth import ANONYMOUS, UserInfo

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
DISCONNECT_CHECK_SECONDS = 1.0
# kube-apiserver's http.Server: ReadHeaderTimeout 32 s, IdleTimeout 90 s, and
# MaxHeaderBytes 1 MiB for the request line and the headers.
HEADER_TIMEOUT_SECONDS = 32.0
_REQUEST_TARGET = re.compile(rb"(?:[A-Z]+ )?(?:/|[a-z]+://)")
IDLE_TIMEOUT_SECONDS = 90.0
MAX_HEADER_BYTES = 1 << 20


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    # The body decoded off the event loop (kubeapi, for large bodies): (value, error)
    decoded: tuple[Any, ApiError | None] | None = field(default=None, repr=False)

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass
class Response:
    status: int = 200
    body: Any = None  # JSON-able, or bytes/str with content_type
    content_type: str = "application/json"
    # watch: each item one JSON line; bytes/str items (logs) are written as they are
    stream: AsyncIterator[Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]
# (peer certificate DER or None, Authorization header) -> the user, or ApiError 401.
Authenticate = Callable[[bytes | None, str], Awaitable[UserInfo]]
# (the authenticated caller, Impersonate-* headers by lower-case name) -> who the request
# runs as, or ApiError 403 (auth/impersonation.py)
Impersonate = Callable[[UserInfo, dict[str, list[str]]], Awaitable[UserInfo]]
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


class HttpServer:
    def __init__(self, handler: Handler, *, host: str, port: int,
                 max_body: int = MAX_BODY, ssl_context: ssl.SSLContext | None = None,
                 authenticate: Authenticate | None = None,
                 routes: Callable[[web.Application], None] | None = None,
                 reuse_port: bool = False, impersonate: Impersonate | None = None,
                 header_timeout: float = HEADER_TIMEOUT_SECONDS,
                 anonymous_paths: frozenset[str] = frozenset()) -> None:
        self._handler = handler
        # paths a request without credentials reaches as system:anonymous, RBAC deciding
        # (Kubernetes' anonymous authenticator limited by its path conditions; SPEC JN3)
        self._anonymous_paths = anonymous_paths
        self._header_timeout = header_timeout
        self._ssl_context = ssl_context
        self._authenticate = authenticate
        self._impersonate = impersonate
        self._routes = routes  # routes served by aiohttp directly (WebSocket streams)
        self._reuse_port = reuse_port
        self._host, self._port = host, port
        self._max_body = max_body
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application(client_max_size=self._max_body)
        if self._routes is not None:
            self._routes(app)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        self._runner = _Runner(app, header_timeout=self._header_timeout, access_log=None,
                               handle_signals=False, shutdown_timeout=1.0,
                               keepalive_timeout=IDLE_TIMEOUT_SECONDS,
                               max_line_size=MAX_HEADER_BYTES,
                               max_field_size=MAX_HEADER_BYTES)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, reuse_address=True,
                           ssl_context=self._ssl_context,
                           reuse_port=self._reuse_port or None)
        await site.start()
        return int(self._runner.addresses[0][1])  # what port 0 became

    async def stop(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None

    async def _serve(self, raw: web.Request) -> web.StreamResponse:
        if self._authenticate is not None and raw.path in self._anonymous_paths \
                and peer_certificate(raw) is None and "Authorization" not in raw.headers:
            current_user.set(ANONYMOUS)
        elif self._authenticate is not None and raw.path.rstrip("/") not in PUBLIC_PATHS:
            try:
                user = await self._authenticate(peer_certificate(raw),
                                                raw.headers.get("Authorization", ""))
                asked = impersonation_headers(raw)
                if asked and self._impersonate is not None:
                    user = await self._impersonate(user, asked)
                current_user.set(user)
            except ApiError as err:
                return _reply(Response(err.code, err.to_status()))
        try:
            body = await raw.read()
        except web.HTTPRequestEntityTooLarge:
            return _reply(_too_large(self._max_body))
        query = {k: raw.query.getall(k)[-1] for k in raw.query}
        request = Request(raw.method.upper(), raw.path, query,
                          {k.lower(): v for k, v in raw.headers.items()}, body)
        response = await self._handler(request)
        if response.stream is None:
            return _reply(response)
        return await _stream(raw, response)


class _Runner(web.AppRunner):
    """aiohttp's AppRunner whose connections are `_Connection`s (header timeout, Status
    answers to malformed requests)."""

    def __init__(self, app: web.Application, *, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._header_timeout = header_timeout

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # aiohttp builds the Server inside Application; only its connection factory
        # differs, so the instance becomes the subclass that makes `_Connection`s.
        server.__class__ = _Server
        assert isinstance(server, _Server)
        server.header_timeout = self._header_timeout
        return server


class _Server(web.Server):
    header_timeout = HEADER_TIMEOUT_SECONDS

    def __call__(self) -> web_protocol.RequestHandler:
        return _Connection(self, loop=self._loop, header_timeout=self.header_timeout,
                           **self._kwargs)


class _Connection(web_protocol.RequestHandler):
    """One client connection. Its request head must be complete within `header_timeout`
    seconds of the connection opening or of the next request's first byte (Go's
    ReadHeaderTimeout); otherwise the connection is closed without an answer, as Go does."""

    def __init__(self, *args: Any, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timeout = header_timeout
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        waiting = self._waiter is not None and not self._waiter.done()
        if self._header_timer is None and waiting and data:
            self._start_header_timer()  # the first byte of the next request
        super().data_received(data)
        if self._messages:  # a whole request head arrived
            self._stop_header_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        if self._header_timeout > 0:
            self._header_timer = self._loop.call_later(self._header_timeout,
                                                       self._header_timed_out)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if not self._messages:
            log.info("closing a connection whose request headers did not arrive in time",
                     extra={"timeout_seconds": self._header_timeout})
            self.force_close()
            if self.transport is not None:
                self.transport.close()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """A request aiohttp could not parse: a Kubernetes `Status` without the bytes it
        choked on or Python's exception text, logged in one line."""
        if isinstance(exc, LineTooLong):
            line = exc.args[0] if exc.args else b""
            # the URI (C parser) or the whole request line (pure-Python parser)
            uri = isinstance(line, bytes | bytearray) and _REQUEST_TARGET.match(line)
            code, text = ((414, "the request URI is too long") if uri else
                          (431, "the request header fields are too large"))
            text += f" (the limit is {MAX_HEADER_BYTES} bytes)"
        elif isinstance(exc, HttpProcessingError) and 400 <= (exc.code or 400) < 500:
            code, text = exc.code or 400, "the request is not valid HTTP/1.1"
        else:  # a fault of the server, not of the request: the log gets the traceback
            log.error("internal error serving a request", exc_info=exc)
            code, text = 500, "an internal error occurred; the apiserver log has the details"
        if code != 500:
            log.info("refused a malformed HTTP request",
                     extra={"code": code, "error": type(exc).__name__})
        reason = {400: "BadRequest", 500: "InternalError"}.get(code, "")
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": text}
        if reason:
            body["reason"] = reason
        body["code"] = code
        response = web.Response(status=code, body=encode_json(body),
                                headers={"Content-Type": "application/json",
                                         "Cache-Control": "no-cache, private"})
        response.force_close()
        return response


def encode_json(body: Any) -> bytes:
    """JSON as kube-apiserver writes it (Go's json.Encoder): compact, non-ASCII kept,
    `<`, `>`, `&` escaped, one trailing newline (SPEC AX6)."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text.encode() + b"\n"
def impersonation_headers(raw: web.Request) -> dict[str, list[str]]:
    """The request's `Impersonate-*` headers by lower-case name (`kubectl --as`)."""
    return {k.lower(): raw.headers.getall(k) for k in set(raw.headers.keys())
            if k.lower().startswith("impersonate-")}


def peer_certificate(raw: web.Request) -> bytes | None:
    """The client's certificate (DER), verified by the TLS handshake against the CA."""
    ssl_object = raw.transport.get_extra_info("ssl_object") if raw.transport else None
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return bytes(der) if der else None


def _too_large(limit: int) -> Response:
    err = ApiError(Reason.REQUEST_ENTITY_TOO_LARGE,
                   f"the request body is larger than the limit of {limit} bytes")
    return Response(err.code, err.to_status())


def _headers(response: Response) -> dict[str, str]:
    return {"Content-Type": response.content_type, "Cache-Control": "no-cache, private",
            **response.headers}


def _reply(response: Response) -> web.Response:
    if isinstance(response.body, bytes):
        data = response.body
    elif isinstance(response.body, str):
        data = response.body.encode()
    else:
        data = encode_json(response.body)
    return web.Response(status=response.status, body=data, headers=_headers(response))


async def _stream(raw: web.Request, response: Response) -> web.StreamResponse:
    out = web.StreamResponse(status=response.status, headers=_headers(response))
    out.enable_chunked_encoding()
    await out.prepare(raw)
    assert response.stream is not None
    items = aiter(response.stream)
    try:
        while True:
            item = await _next_while_connected(raw, items)
            if item is _END:
                break
            if isinstance(item, str):
                item = item.encode()
            await out.write(item if isinstance(item, bytes) else encode_json(item))
        await out.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the client went away (kubectl Ctrl-C); nothing is left to tell it
    finally:
        close = getattr(response.stream, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
    return out


_END = object()


async def _next_while_connected(raw: web.Request, items: AsyncIterator[Any]) -> Any:
    """The stream's next item, or _END when it ends or the client hangs up while it waits
    (a quiet watch or `logs -f` must not outlive its client)."""
    waiting = asyncio.ensure_future(anext(items, _END))
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=DISCONNECT_CHECK_SECONDS)
        if done:
            return waiting.result()
        if raw.transport is None or raw.transport.is_closing():
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
            return _END
