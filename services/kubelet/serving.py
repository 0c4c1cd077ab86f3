"""The kubelet's own port over mutual TLS (SPEC AU1): logs, exec and metrics.

In a secure cluster (`SKIFF_KUBELET_TLS_CERT_FILE`/`_KEY_FILE` and the cluster CA in the
kubelet's environment, set by `skiff up`) the kubelet serves those services on a port of
their own with a serving certificate that names the node and its addresses, requires a
client certificate from the cluster CA, and lets only the apiserver's
`kube-apiserver-kubelet-client` identity and `system:masters` in, as Kubernetes' kubelet
does with its webhook authorizer and the apiserver's `system:kubelet-api-admin` binding.
Anyone else (another node's kubelet, a user) is answered Forbidden in the kubelet's words.
The health port stays plaintext and serves only health. `--insecure` clusters keep the
services on the health port, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from skiff.api.errors import ApiError, Reason
from skiff.certtoken import check_pair, pair_stamp
from skiff.client.credentials import ENV_CA
from skiff.client.kubelet import ENV_KUBELET_TLS_CERT, ENV_KUBELET_TLS_KEY
from skiff.pki import APISERVER_KUBELET_CLIENT, MASTERS_GROUP, identity_of
from skiff.rpc.errors import to_grpc

# How long a refused streaming call waits for the caller's first message (see _refuse).
_FIRST_MESSAGE_WAIT_SECONDS = 1.0

__all__ = ["KubeletTls", "authorized_handlers", "check_caller", "start_kubelet_server"]


@dataclass(frozen=True)
class KubeletTls:
    cert_file: Path
    key_file: Path
    client_ca_file: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KubeletTls | None:
        env = os.environ if env is None else env
        cert, key, ca = (env.get(ENV_KUBELET_TLS_CERT, ""), env.get(ENV_KUBELET_TLS_KEY, ""),
                         env.get(ENV_CA, ""))
        if not cert:
            return None
        if not (key and ca):
            raise SystemExit(f"skiff-kubelet: {ENV_KUBELET_TLS_CERT} needs "
                             f"{ENV_KUBELET_TLS_KEY} and {ENV_CA}")
        return cls(Path(cert), Path(key), Path(ca))

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key_file.read_bytes(), self.cert_file.read_bytes())],
            root_certificates=self.client_ca_file.read_bytes(), require_client_auth=True)

    def _configuration(self) -> Any:
        key_pem, cert_pem = self.key_file.read_bytes(), self.cert_file.read_bytes()
        check_pair(x509.load_pem_x509_certificate(cert_pem),
                   serialization.load_pem_private_key(key_pem, password=None),
                   cert_file=self.cert_file, key_file=self.key_file)
        return grpc.ssl_server_certificate_configuration(
            [(key_pem, cert_pem)], root_certificates=self.client_ca_file.read_bytes())

    def dynamic_server_credentials(self) -> grpc.ServerCredentials:
        """Like `server_credentials`, but a certificate whose files were replaced (renewed
        by CSR, SPEC JN2) serves from the next handshake on; a pair caught mid-replacement
        (key and certificate not matching) is not taken."""
        seen = [pair_stamp(self.cert_file, self.key_file)]

        def fetch() -> Any:
            try:
                stamp = pair_stamp(self.cert_file, self.key_file)
                if stamp == seen[0]:
                    return None
                configuration = self._configuration()
            except (OSError, ValueError):
                return None
            seen[0] = stamp
            return configuration

        return grpc.dynamic_ssl_server_credentials(self._configuration(), fetch,
                                                   require_client_authentication=True)


def _subresource(method: str) -> str:
    """What Kubernetes' kubelet asks the authorizer for: nodes/metrics for usage,
    nodes/proxy for container logs and exec."""
    return "metrics" if method.rsplit("/", 1)[-1].endswith("Metrics") else "proxy"


def check_caller(context: grpc.aio.ServicerContext[Any, Any], method: str) -> None:
    """Raise Forbidden unless the client certificate is the apiserver's kubelet client or
    in system:masters (the TLS handshake already required one signed by the CA)."""
    user, groups = "system:anonymous", tuple[str, ...]()
    for pem in context.auth_context().get("x509_pem_cert") or []:
        identity = identity_of(bytes(pem))
        user, groups = identity.user, identity.groups
    if user == APISERVER_KUBELET_CLIENT or MASTERS_GROUP in groups:
        return
    verb = "get" if _subresource(method) == "metrics" else "create"
    raise ApiError(Reason.FORBIDDEN, f"Forbidden (user={user}, verb={verb}, resource=nodes, "
                                     f"subresource={_subresource(method)})")


async def _deny(context: grpc.aio.ServicerContext[Any, Any], err: ApiError) -> None:
    code, details, trailer = to_grpc(err)
    await context.abort(code, details, trailing_metadata=trailer)


async def _refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any], err: ApiError,
                  *, streaming_requests: bool) -> None:
    if streaming_requests:
        # Let the caller's first message land before the refusal: a client that writes
        # its request after the call already ended gets grpc's INTERNAL "Internal error
        # from Core" from the write instead of this 403 (seen from the apiserver's exec).
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_FIRST_MESSAGE_WAIT_SECONDS):
                await anext(aiter(request))
    await _deny(context, err)


def _guarded(behavior: Callable[..., Any], method: str, *,
             streaming_requests: bool) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behavior):
        async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]
                         ) -> AsyncIterator[Any]:
            try:
                check_caller(context, method)
            except ApiError as err:
                await _refuse(request, context, err, streaming_requests=streaming_requests)
            async for item in behavior(request, context):
                yield item
        return stream

    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            check_caller(context, method)
        except ApiError as err:
            await _refuse(request, context, err, streaming_requests=streaming_requests)
        return await behavior(request, context)
    return call


class _Authorized(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Wraps generic handlers: every method checks the caller first."""

    def __init__(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._handlers = tuple(handlers)

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler | None:
        method = str(handler_call_details.method)
        for handler in self._handlers:
            found = handler.service(handler_call_details)
            if found is None:
                continue
            kind = ("unary_unary" if found.unary_unary else "unary_stream"
                    if found.unary_stream else "stream_unary" if found.stream_unary
                    else "stream_stream")
            wrapped = _guarded(getattr(found, kind), method,
                               streaming_requests=kind.startswith("stream_"))
            guarded: grpc.RpcMethodHandler = found._replace(**{kind: wrapped})
            return guarded
        return None


def authorized_handlers(handlers: Sequence[grpc.GenericRpcHandler]) -> grpc.GenericRpcHandler:
    return _Authorized(handlers)


async def start_kubelet_server(tls: KubeletTls, handlers: Sequence[grpc.GenericRpcHandler],
                               *, addresses: Sequence[str], port: int = 0,
                               dynamic: bool = False) -> tuple[grpc.aio.Server, int]:
    """Serve `handlers` with mutual TLS on `port` (0: any free one, the same on every
    address); answers the server and the port the Node publishes."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((authorized_handlers(handlers),))
    for address in addresses:
        # dynamic credentials are one per port: grpc hands their first configuration to
        # the first port only, and the next would start with none
        credentials = tls.dynamic_server_credentials() if dynamic \
            else tls.server_credentials()
        bound = server.add_secure_port(f"{address}:{port}", credentials)
        if bound == 0:
            raise OSError(f"kubelet: cannot bind its port {address}:{port}")
        port = bound
    await server.start()
    return server, port
