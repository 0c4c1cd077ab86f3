"""Calling a webhook: the AdmissionReview POSTed as JSON over HTTPS (aiohttp), trusting only
the webhook's `caBundle` (the system's roots when it has none, as Kubernetes does), within
`timeoutSeconds`, to its `url` or to its Service.

A Service reference is resolved as kube-apiserver's endpoint routing does: the Service's
port named by `service.port`, then a ready address of its EndpointSlices with that port's
target (so the apiserver process reaches the pod directly), or the Service's cluster IP
when it has no endpoints slice yet; the TLS server name stays `<name>.<namespace>.svc`, the
name a webhook's certificate is issued for. Failures are `CallFailed` with the text Go's
HTTP client would give (`dial tcp ...: connect: connection refused`, `context deadline
exceeded`, `x509: certificate signed by unknown authority`), never a Python exception's.
"""

from __future__ import annotations

import asyncio
import errno
import json
import ssl
from typing import Any, Protocol

import aiohttp
from yarl import URL

from skiff.api.kinds import lookup, storage_key, storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.hooks import Hook, ServiceRef
from skiff.apiserver.storage.interface import Storage

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class CallFailed(Exception):
    """The webhook could not be called; the message is the reason Kubernetes would give."""


class Target(Protocol):
    """Where a webhook is reached: what `HttpsCaller` reads of an admission webhook (`Hook`)
    or of a CRD's conversion webhook."""

    @property
    def url(self) -> str | None: ...

    @property
    def service(self) -> ServiceRef | None: ...

    @property
    def ca_bundle(self) -> bytes: ...

    @property
    def timeout_seconds(self) -> int: ...


class Caller(Protocol):
    """Sends one AdmissionReview to a webhook and returns the decoded JSON answer."""

    async def __call__(self, hook: Hook, review: Obj) -> Any: ...


class ServiceResolver:
    """A webhook Service's address and port as reachable from the apiserver process."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def resolve(self, ref: ServiceRef) -> tuple[str, int]:
        kv, _ = await self._storage.get(storage_key(lookup("services"), ref.namespace,
                                                    ref.name))
        service = kv.obj if kv is not None else None
        if service is None:
            raise CallFailed(f'service "{ref.name}" not found')
        spec = service.get("spec") or {}
        port = next((p for p in spec.get("ports") or [] if p.get("port") == ref.port), None)
        if port is None:
            raise CallFailed(f'no service port {ref.port} found for service "{ref.name}"')
        slices, _ = await self._storage.list(storage_prefix(lookup("endpointslices"),
                                                            ref.namespace))
        for slice_kv in slices:
            es = slice_kv.obj or {}
            if (es.get("metadata", {}).get("labels") or {}).get(SERVICE_NAME_LABEL) != ref.name:
                continue
            target = next((p.get("port") for p in es.get("ports") or []
                           if (p.get("name") or "") == (port.get("name") or "")), None)
            for endpoint in es.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    if isinstance(target, int):
                        return str(address), target
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            return str(cluster_ip), ref.port
        raise CallFailed(f'no endpoints available for service "{ref.name}"')


def _context(ca_bundle: bytes) -> ssl.SSLContext:
    if ca_bundle:
        try:
            return ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace"))
        except ssl.SSLError:
            raise CallFailed("unable to load root certificates: unable to parse bytes as "
                             "PEM block") from None
    return ssl.create_default_context()


def _dial_error(err: aiohttp.ClientConnectorError, where: str) -> str:
    os_error = err.os_error
    if isinstance(os_error, ConnectionRefusedError) or os_error.errno == errno.ECONNREFUSED:
        return f"dial tcp {where}: connect: connection refused"
    text = (os_error.strerror or str(os_error) or "connection failed").lower()
    return f"dial tcp {where}: connect: {text}"


def _status_error(status: int, body: bytes) -> str:
    """client-go's error for a non-2xx answer: the Status it carries, else a generic one."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status" and decoded.get("message"):
        return str(decoded["message"])
    if status == 404:
        return "the server could not find the requested resource"
    if status >= 500:
        text = body.decode("utf-8", "replace").strip()[:200]
        return f'an error on the server ("{text}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more " \
           "information"


class HttpsCaller:
    """The real call: HTTPS with the hook's caBundle and timeout (one session per call, so
    nothing outlives the request)."""

    def __init__(self, resolver: ServiceResolver) -> None:
        self._resolver = resolver

    async def __call__(self, hook: Target, review: Obj) -> Any:
        seconds = hook.timeout_seconds
        if hook.service is not None:
            svc = hook.service
            host = f"{svc.name}.{svc.namespace}.svc"
            shown = f"https://{host}:{svc.port}{svc.path}"
            server_name: str | None = host
        else:
            shown = str(hook.url)
            server_name = None
        prefix = f'Post "{shown}?timeout={seconds}s"'
        try:
            async with asyncio.timeout(seconds):
                if hook.service is not None:
                    address, port = await self._resolver.resolve(hook.service)
                    target = f"https://{_bracket(address)}:{port}{hook.service.path}"
                    where = f"{_bracket(address)}:{port}"
                else:
                    target = shown
                    url = URL(shown)
                    where = f"{_bracket(url.host or '')}:{url.port}"
                return await self._post(target, review, hook=hook, server_name=server_name,
                                        seconds=seconds, where=where, prefix=prefix)
        except TimeoutError:
            raise CallFailed(f"{prefix}: context deadline exceeded") from None
        except _Answered as err:
            raise CallFailed(str(err)) from None
        except CallFailed as err:
            raise CallFailed(f"{prefix}: {err}") from None

    async def _post(self, target: str, review: Obj, *, hook: Target, server_name: str | None,
                    seconds: int, where: str, prefix: str) -> Any:
        context = _context(hook.ca_bundle)
        try:
            async with aiohttp.ClientSession() as session, session.post(
                    target, params={"timeout": f"{seconds}s"}, data=json.dumps(review),
                    headers={"Content-Type": "application/json",
                             "Accept": "application/json"},
                    ssl=context, server_hostname=server_name) as resp:
                body = await resp.read()
                status = resp.status
        except aiohttp.ClientConnectorCertificateError as err:
            raise CallFailed(_certificate_error(err)) from None
        except aiohttp.ClientConnectorSSLError:
            raise CallFailed("remote error: tls: handshake failure") from None
        except aiohttp.ClientConnectorError as err:
            raise CallFailed(_dial_error(err, where)) from None
        except (aiohttp.ClientError, ConnectionError):
            raise CallFailed("EOF") from None
        if not 200 <= status < 300:
            raise _Answered(_status_error(status, body))
        try:
            return json.loads(body)
        except ValueError:
            raise _Answered("couldn't get version/kind; json parse error: invalid character "
                            "looking for beginning of value") from None


class _Answered(CallFailed):
    """The webhook answered, with an error (no `Post "..."` prefix in Go's message)."""


def _certificate_error(err: aiohttp.ClientConnectorCertificateError) -> str:
    reason = str(getattr(err.certificate_error, "verify_message", "") or "")
    if "hostname" in reason.lower() or "ip address mismatch" in reason.lower():
        return "tls: failed to verify certificate: x509: certificate is valid for other " \
               "names, not this host"
    if "expired" in reason.lower():
        return "tls: failed to verify certificate: x509: certificate has expired or is not " \
               "yet valid"
    return "tls: failed to verify certificate: x509: certificate signed by unknown authority"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
