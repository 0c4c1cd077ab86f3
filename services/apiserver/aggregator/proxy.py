"""The aggregation layer's proxy (kube-aggregator's `proxyHandler`): a request for a
group/version an APIService sends to a Service is passed on to that extension apiserver
over HTTPS — method, path, query, body, and the answer streamed back as it comes (a watch
for as long as it lasts).

The connection trusts the APIService's `caBundle` only (the system's roots when it has
none; nothing with `insecureSkipTLSVerify`) and checks the certificate for
`<service>.<namespace>.svc`; the apiserver proves itself with its proxy client certificate
(`--proxy-client-cert-file`), and the user goes along in the front-proxy headers
(headers.py). The Service is resolved to one ready endpoint of its EndpointSlices, else its
cluster IP, with the admission webhooks' resolver. An APIService that is not Available, or
a backend that cannot be reached, answers 503 `service unavailable` as kube's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from skiff.apiserver.admission.webhook.client import CallFailed
from skiff.apiserver.admission.webhook.hooks import ServiceRef
from skiff.apiserver.aggregator.headers import AGGREGATOR_USER, forwarded_headers
from skiff.apiserver.aggregator.table import Registration
from skiff.apiserver.endpoints.handlers.queryparams import query_bool
from skiff.apiserver.endpoints.http import Request, Response
from skiff.auth import UserInfo

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 5.0
DISCOVERY_CHECK_TIMEOUT_SECONDS = 5.0
_NOT_RELAYED = frozenset({"content-type", "content-length", "transfer-encoding",
                          "content-encoding", "connection", "keep-alive", "date", "server",
                          "cache-control"})


class Resolver(Protocol):
    """A Service's reachable address and port (admission.webhook's ServiceResolver)."""

    async def resolve(self, ref: ServiceRef) -> tuple[str, int]: ...


@dataclass(frozen=True)
class ProxyClientCertificate:
    """`--proxy-client-cert-file` / `--proxy-client-key-file` (empty: none is sent)."""

    cert_file: str = ""
    key_file: str = ""


NO_CERTIFICATE = ProxyClientCertificate()


class Unreachable(Exception):
    """The backend could not be reached; the message is Go's (`dial tcp ...`)."""


def unavailable(message: str = "service unavailable") -> Response:
    """kube's answer when it cannot proxy: 503, text/plain (client-go reports it as
    `the server is currently unable to handle the request`)."""
    return Response(503, message + "\n", content_type="text/plain; charset=utf-8",
                    headers={"X-Content-Type-Options": "nosniff"})


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


class Proxier:
    """Sends requests to extension apiservers (one connection pool for the process)."""

    def __init__(self, resolver: Resolver, *,
                 certificate: ProxyClientCertificate = NO_CERTIFICATE) -> None:
        self._resolver = resolver
        self._certificate = certificate
        self._contexts: dict[tuple[bytes, bool], ssl.SSLContext] = {}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _context(self, reg: Registration, *, verify: bool = True) -> ssl.SSLContext:
        insecure = reg.insecure_skip_tls_verify or not verify
        key = (b"" if insecure else reg.ca_bundle, insecure)
        context = self._contexts.get(key)
        if context is None:
            context = ssl.create_default_context(
                cadata=reg.ca_bundle.decode("ascii", "replace") if reg.ca_bundle
                and not insecure else None)
            if insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self._certificate.cert_file:
                context.load_cert_chain(self._certificate.cert_file,
                                        self._certificate.key_file or None)
            self._contexts[key] = context
        return context

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # bodies arrive decoded (the backend may compress; the client is answered
            # uncompressed, so Content-Encoding is not relayed)
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECONDS))
        return self._session

    async def _open(self, reg: Registration, *, method: str, path: str,
                    query: dict[str, str], headers: list[tuple[str, str]], body: bytes,
                    timeout: float | None = None, verify: bool = True
                    ) -> aiohttp.ClientResponse:
        assert reg.service is not None
        try:
            address, port = await self._resolver.resolve(reg.service)
        except CallFailed as err:
            raise Unreachable(str(err)) from None
        where = f"{_host(address)}:{port}"
        try:
            return await self._client().request(
                method, f"https://{where}{path}", params=query, headers=headers,
                data=body or None, ssl=self._context(reg, verify=verify),
                server_hostname=reg.server_name,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout,
                                              sock_connect=CONNECT_TIMEOUT_SECONDS))
        except aiohttp.ClientConnectorCertificateError as err:
            reason = str(getattr(err.certificate_error, "verify_message", "") or "").lower()
            problem = (f"certificate is not valid for {reg.server_name}"
                       if "mismatch" in reason or "hostname" in reason else
                       "certificate has expired or is not yet valid" if "expired" in reason
                       else "certificate signed by unknown authority")
            raise Unreachable(f"tls: failed to verify certificate: x509: {problem}") from None
        except aiohttp.ClientConnectorSSLError:
            raise Unreachable("remote error: tls: handshake failure") from None
        except aiohttp.ClientConnectorError as err:
            refused = (isinstance(err.os_error, ConnectionRefusedError)
                       or err.os_error.errno == errno.ECONNREFUSED)
            text = "connection refused" if refused else (
                err.os_error.strerror or str(err.os_error)).lower()
            raise Unreachable(f"dial tcp {where}: connect: {text}") from None
        except TimeoutError:
            raise Unreachable(f"dial tcp {where}: i/o timeout") from None
        except ssl.SSLError:
            raise Unreachable("remote error: tls: handshake failure") from None
        except (aiohttp.ClientError, ConnectionError):
            raise Unreachable("EOF") from None

    async def forward(self, reg: Registration, req: Request, user: UserInfo) -> Response:
        """`req` answered by the extension apiserver `reg` names."""
        if not reg.available:
            return unavailable()
        try:
            resp = await self._open(reg, method=req.method, path=req.path,
                                    query=req.query,
                                    headers=forwarded_headers(req.headers, user),
                                    body=req.body)
        except Unreachable as err:
            log.warning("could not reach an extension apiserver",
                        extra={"apiservice": reg.name, "error": str(err)})
            return unavailable(f"error trying to reach service: {err}")
        headers = {k: v for k, v in resp.headers.items() if k.lower() not in _NOT_RELAYED}
        content_type = resp.headers.get("Content-Type", "application/json")
        if req.method == "GET" and query_bool(req.query, "watch") or (
                "/watch/" in req.path):
            return Response(resp.status, content_type=content_type, headers=headers,
                            stream=_relay(resp))
        try:
            body = await resp.read()
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            return unavailable("error trying to reach service: unexpected EOF")
        finally:
            resp.release()
        return Response(resp.status, body, content_type=content_type, headers=headers)

    async def discovery_check(self, reg: Registration) -> str | None:
        """kube's availability check: GET `/apis/<group>/<version>` as
        system:kube-aggregator within 5 s, without verifying the backend's certificate (as
        kube's check, "best effort": a wrong caBundle shows in the proxied requests' 503s,
        not here); None when it answered 2xx, else Go's error text
        (`failing or missing response from <url>: ...`)."""
        path = f"/apis/{reg.group}/{reg.version}" if reg.group else f"/api/{reg.version}"
        assert reg.service is not None
        try:
            address, port = await self._resolver.resolve(reg.service)
        except CallFailed as err:
            return str(err)
        url = f"https://{_host(address)}:{port}{path}"
        try:
            async with asyncio.timeout(DISCOVERY_CHECK_TIMEOUT_SECONDS + 1):
                resp = await self._open(
                    reg, method="GET", path=path, query={},
                    headers=forwarded_headers({}, AGGREGATOR_USER), body=b"", verify=False,
                    timeout=DISCOVERY_CHECK_TIMEOUT_SECONDS)
                resp.release()
        except Unreachable as err:
            return f"failing or missing response from {url}: Get \"{url}\": {err}"
        except TimeoutError:
            return f"timed out waiting for {url}"
        if not 200 <= resp.status < 300:
            return f"failing or missing response from {url}: bad status from {url}: " \
                   f"{resp.status}"
        return None


async def _relay(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The backend's body as it arrives (watch events, one chunk at a time)."""
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    except (aiohttp.ClientError, ConnectionError):
        pass  # the backend went away: the stream ends, as a watch that closes
    finally:
        with contextlib.suppress(Exception):
            resp.release()
            resp.close()
