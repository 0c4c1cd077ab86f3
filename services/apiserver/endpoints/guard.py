"""The door of both fronts: who is calling (401) and may they (403), before the registry.

On gRPC the caller is named by its `authorization` metadata (a certificate token, see
skiff.certtoken, or a bearer token); on HTTPS by its TLS client certificate or bearer token.

`RequestGuard.grpc(method, context, request)` and `RequestGuard.http(raw, ...)` turn a call
into Kubernetes' request attributes (verb, group, resource, subresource, namespace, name),
authenticate it (`auth.authenticator.Authenticator`) and authorize it
(`auth.rbac.ApiAuthorizer`). The user is left in `auth.context.current_user` for admission
(NodeRestriction, PodSecurity). Also makes
the TLS server credentials of both fronts from `--tls-cert-file`/`--tls-private-key-file`
and `--client-ca-file`.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from skiff.api import ApiError
from skiff.api.kinds import lookup
from skiff.api.types import Obj
from skiff.apiserver.auth.authenticator import Authenticator
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.auth.impersonation import impersonate
from skiff.apiserver.auth.rbac import ApiAuthorizer
from skiff.apiserver.endpoints.handlers.queryparams import query_bool
from skiff.apiserver.registry.scope import (
    COLLECTION_VERBS,
    authorized_namespace,
    past_revision,
    request_namespace,
    selected_name,
    text_field,
)
from skiff.auth import ANONYMOUS, Attributes, UserInfo, unauthorized

# gRPC method -> (verb, subresource); Discovery needs only authentication.
_GRPC_VERBS: dict[str, tuple[str, str]] = {
    "Create": ("create", ""),
    "Get": ("get", ""),
    "List": ("list", ""),
    "Watch": ("watch", ""),
    "Update": ("update", ""),
    "UpdateStatus": ("update", "status"),
    "Delete": ("delete", ""),
    "Bind": ("create", "binding"),
    "Evict": ("create", "eviction"),
    # an object's past versions: what a list at each of those revisions would show
    "History": ("list", ""),
    "CreateToken": ("create", "token"),  # serviceaccounts/token (TokenRequest)
    "PodMetrics": ("list", ""),  # pods.metrics.k8s.io, as the HPA controller reads them
    "Record": ("get", "record"),  # perturbations/record (issue 35)
    "UpdateApproval": ("update", "approval"),  # certificatesigningrequests (SPEC JN2)
}
_GRPC_RESOURCE = {"Bind": "pods", "Evict": "pods", "CreateToken": "serviceaccounts",
                  "PodMetrics": "pods", "Record": "perturbations",
                  "UpdateApproval": "certificatesigningrequests"}
_GRPC_GROUP = {"PodMetrics": "metrics.k8s.io"}
# Methods that read a collection: without a namespace they read every namespace (AU5).
_GRPC_COLLECTIONS = frozenset({"List", "Watch", "PodMetrics"})

_text = text_field


def _metadata(req: Obj) -> Obj:
    """The metadata of the request's object, or {} when it has none (the registry answers
    a malformed object with its 400)."""
    obj = req.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


_HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
# Paths any authenticated user may read (Kubernetes' system:discovery and
# system:public-info-viewer); health probes answer even without credentials.
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


@dataclass(frozen=True)
class TlsFiles:
    cert_file: Path
    key_file: Path
    client_ca_file: Path

    def grpc_credentials(self) -> grpc.ServerCredentials:
        # TLS that asks for no client certificate: grpcio can only require one (a caller
        # without fails the handshake and never hears 401) or not ask (1.85:
        # `require_client_auth` maps to grpc core's REQUEST_AND_REQUIRE_..._AND_VERIFY or
        # DONT_REQUEST, nothing between). Callers prove who they are in `authorization`:
        # a certificate token (skiff.certtoken) or a bearer token; none → 401.
        return grpc.ssl_server_credentials(
            [(self.key_file.read_bytes(), self.cert_file.read_bytes())])

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(
            self.client_ca_file))
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx


_OBJECT_PATH = re.compile(r"\A/api/v1/namespaces/([^/]+)/([^/]+)/([^/]+)\Z")


def anonymous_gets(paths: frozenset[str]) -> frozenset[tuple[str, str, str]]:
    """(resource, namespace, name) of the core-group object paths among
    --anonymous-auth-paths: the gRPC `Get`s a caller without credentials may make."""
    found = (m.groups() for m in map(_OBJECT_PATH.match, paths) if m is not None)
    return frozenset((resource, namespace, name) for namespace, resource, name in found)


class RequestGuard:
    def __init__(self, authenticator: Authenticator, authorizer: ApiAuthorizer, *,
                 anonymous_paths: frozenset[str] = frozenset()) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        # SPEC JN3: `skiff join` reads cluster-info on the address the kubelet dials
        self._anonymous_gets = anonymous_gets(anonymous_paths)

    # -- gRPC ----------------------------------------------------------------------------

    async def grpc_user(self, context: grpc.aio.ServicerContext[Any, Any]) -> UserInfo:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str):
                user = await self.authenticator.from_authorization(value)
                if user is not None:
                    return user
        raise unauthorized()

    def _anonymous_get(self, method: str, context: grpc.aio.ServicerContext[Any, Any],
                       req: Obj) -> bool:
        """A `Get` of an --anonymous-auth-paths object without `authorization`."""
        if method != "Get" or any(k == "authorization"
                                  for k, _ in context.invocation_metadata() or ()):
            return False
        return (_text(req, "resource"), _text(req, "namespace"),
                _text(req, "name")) in self._anonymous_gets

    async def grpc(self, method: str, context: grpc.aio.ServicerContext[Any, Any],
                   req: Obj) -> None:
        user = ANONYMOUS if self._anonymous_get(method, context, req) \
            else await self.grpc_user(context)
        await self.grpc_authorize(method, user, req)

    async def grpc_authorize(self, method: str, user: UserInfo, req: Obj) -> None:
        """403 unless `user` may make request `req` of `method`; leaves the user for
        admission. A batch's items (endpoints.batch) each pass here, one caller for all."""
        current_user.set(user)
        verb_sub = _GRPC_VERBS.get(method)
        if method == "SubjectAccessReview":  # not a stored kind: `create` on the review
            await self.authorizer.check(Attributes(
                user=user, verb="create", api_group="authorization.k8s.io",
                resource="subjectaccessreviews"))
            return
        if verb_sub is None:
            return  # Discovery: any authenticated user
        verb, sub = verb_sub
        resource = _GRPC_RESOURCE.get(method) or _text(req, "resource")
        try:
            info = lookup(resource)
        except ApiError:
            return  # the registry answers NotFound for an unknown resource
        options = req.get("options")
        options = options if isinstance(options, dict) else {}
        # SPEC AU5: the scope the registry will read or write, from the same function
        namespace = request_namespace(info, req.get("namespace"),
                                      collection=method in _GRPC_COLLECTIONS)
        if method in ("List", "Watch"):
            # the name a list/watch is narrowed to (Kubernetes: fieldSelector metadata.name)
            name = _text(req, "name") if method == "Watch" else ""
            name = name or selected_name(_text(options, "fieldSelector"))
        elif method in ("Update", "UpdateStatus", "UpdateApproval"):
            # the name that is written: the body's (the registry refuses a differing `name`)
            name = _text(req, "name") or _text(_metadata(req), "name")
        elif method == "PodMetrics":
            name = ""
        else:
            name = _text(req, "name")
        if method == "Get" and past_revision(options.get("revision")):
            verb = "list"  # a read at a past revision is a list at that revision (item 8)
        await self.authorizer.check(Attributes(
            user=user, verb=verb, api_group=_GRPC_GROUP.get(method, info.group),
            resource=info.resource, subresource=sub,
            namespace=authorized_namespace(namespace), name=name))

    # -- HTTP ----------------------------------------------------------------------------

    async def http_user(self, *, peer_der: bytes | None, authorization: str) -> UserInfo:
        if peer_der:
            user = self.authenticator.from_der(peer_der)
            if user is not None:
                return user
        if authorization:
            user = await self.authenticator.from_authorization(authorization)
            if user is not None:
                return user
        raise unauthorized()

    async def http_user_of(self, peer_der: bytes | None, authorization: str) -> UserInfo:
        return await self.http_user(peer_der=peer_der, authorization=authorization)

    async def http_impersonate(self, caller: UserInfo,
                               headers: dict[str, list[str]]) -> UserInfo:
        """`kubectl --as/--as-group`: who the request runs as (auth/impersonation.py)."""
        return await impersonate(caller, headers, self.authorizer)

    async def http_non_resource(self, *, path: str, method: str) -> None:
        """A non-resource URL (/metrics) against RBAC's `nonResourceURLs`."""
        user = current_user.get()
        if user is None:
            return
        await self.authorizer.check(Attributes(
            user=user, verb=_HTTP_VERBS.get(method, method.lower()), path=path))

    async def http_resource(self, *, method: str, query: dict[str, str], group: str,
                            resource: str, namespace: str | None, name: str,
                            subresource: str) -> None:
        user = current_user.get()
        if user is None:
            return
        if method == "GET":
            verb = "get" if name else (
                "watch" if query_bool(query, "watch") else "list")
        else:
            verb = _HTTP_VERBS.get(method, method.lower())
            if verb == "delete" and not name:
                verb = "deletecollection"
        collection = verb in COLLECTION_VERBS
        try:
            info = lookup(resource)
        except ApiError:
            scope = namespace or None
        else:  # SPEC AU5: the scope the registry reads or writes, from the same function
            scope = request_namespace(info, namespace, collection=collection)
        if verb in ("list", "watch"):  # narrowed by fieldSelector=metadata.name=<name>
            name = selected_name(query.get("fieldSelector", ""))
        await self.authorizer.check(Attributes(
            user=user, verb=verb, api_group=group, resource=resource,
            subresource=subresource, namespace=authorized_namespace(scope), name=name))
