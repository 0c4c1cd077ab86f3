"""The apiserver's gRPC front: decode a request, call the registry, encode the answer.

Generic method handlers carry msgpack bytes (DESIGN: gRPC + msgpack). Every failure a user
can cause comes back as a Kubernetes `Status` (see `skiff.rpc.errors`); anything else is
logged with its trace id and answered as InternalError, never as a stack trace. The
standard gRPC health service reports SERVING once etcd has answered.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from skiff.api import ApiError, Reason
from skiff.api.kinds import KINDS, lookup
from skiff.api.types import Obj
from skiff.apiserver.auth import reviews
from skiff.apiserver.auth.satoken import TokenAuthority
from skiff.apiserver.endpoints.batch import BATCHABLE, BatchRunner
from skiff.apiserver.endpoints.guard import RequestGuard, TlsFiles
from skiff.apiserver.endpoints.handlers import collection, decoding
from skiff.apiserver.endpoints.handlers.fieldmanager import managers
from skiff.apiserver.endpoints.metricsapi import MetricsApi
from skiff.apiserver.endpoints.openapi import schemas as openapi
from skiff.apiserver.registry.scope import request_namespace
from skiff.apiserver.registry.store import Registry
from skiff.apiserver.registry.tokenrequest import create_token
from skiff.apiserver.storage.fencing import leader_epoch
from skiff.rpc import (
    MAX_MESSAGE_BYTES,
    MAX_OBJECT_BYTES,
    SERVICE,
    CodecError,
    decode_map,
    encode,
    encode_batch,
    to_grpc,
)
from skiff.rpc.epoch import EPOCH_METADATA, LeaderEpoch

log = logging.getLogger(__name__)

Handler = Callable[[Obj], Awaitable[Obj]]
# A batch holds many objects, each still limited to MAX_OBJECT_BYTES by the registry.
MAX_BATCH_BYTES = 64 * 1024 * 1024


def _str(req: Obj, field: str) -> str:
    value = req.get(field) or ""
    if not isinstance(value, str):
        raise ApiError.bad_request(f"{field}: must be a string")
    return value


def _int(options: Obj, field: str, default: int = 0) -> int:
    value = options.get(field, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ApiError.bad_request(f"{field}: must be an integer")
    return value if isinstance(value, int) else decoding.go_int(field, value)


def _options(req: Obj) -> Obj:
    options = req.get("options") or {}
    if not isinstance(options, dict):
        raise ApiError.bad_request("options: must be a map")
    return options


def _cached(options: Obj) -> bool:
    """A get or list that allows a cached answer, as Kubernetes' resourceVersion=0 or
    NotOlderThan (a Perturbation's stale view answers it: skiff.apiserver.perturbation)."""
    return (str(options.get("resourceVersion")) == "0"
            or options.get("resourceVersionMatch") == "NotOlderThan")


def _object(req: Obj) -> Obj:
    obj = req.get("object")
    if not isinstance(obj, dict):
        raise ApiError.bad_request("object: required, and must be a map (a Kubernetes object)")
    decoding.reject_binary(obj)  # only what the object's JSON form can hold
    kind = obj.get("kind")
    return decoding.object_meta(obj, kind if isinstance(kind, str) and kind else "Object")


def _field_validation(options: Obj) -> str:
    mode = options.get("fieldValidation") or "Warn"
    if mode not in ("Ignore", "Warn", "Strict"):
        shown = json.dumps(mode) if isinstance(mode, str) else decoding.json_type(mode)
        raise ApiError.bad_request(f'fieldValidation: Unsupported value: {shown}: supported '
                                   'values: "Ignore", "Warn", "Strict"')
    return str(mode)


class ApiService:
    """Maps each RPC method to the registry."""

    def __init__(self, registry: Registry, *, tokens: TokenAuthority | None = None,
                 metrics: MetricsApi | None = None) -> None:
        self.registry = registry
        self.tokens = tokens or TokenAuthority()
        self.metrics = metrics or MetricsApi(registry)
        # managedFields of gRPC writes read the schemas: load them off the event loop
        threading.Thread(target=openapi.warm, name="openapi-warm-grpc", daemon=True).start()

    async def Create(self, req: Obj) -> Obj:
        opts = _options(req)
        result = await self.registry.create(_str(req, "resource"), req.get("namespace"),
                                            _object(req),
                                            field_validation=_field_validation(opts),
                                            manager=managers.current(opts))
        return result.to_wire()

    async def Get(self, req: Obj) -> Obj:
        opts = _options(req)
        obj = await self.registry.get(_str(req, "resource"), req.get("namespace"),
                                      _str(req, "name"), revision=_int(opts, "revision"),
                                      allow_cached=_cached(opts))
        return {"object": obj}

    async def List(self, req: Obj) -> Obj:
        opts = _options(req)
        return await self.registry.list(
            _str(req, "resource"), req.get("namespace"),
            label_selector=_str(opts, "labelSelector"),
            field_selector=_str(opts, "fieldSelector"),
            revision=_int(opts, "revision"), limit=_int(opts, "limit"),
            continue_token=_str(opts, "continue"), allow_cached=_cached(opts))

    async def Update(self, req: Obj) -> Obj:
        opts = _options(req)
        # `name`, when sent, is the object addressed (the URL's name over HTTP): a body
        # naming another is a 400 (SPEC AU5); the guard authorized that same name.
        result = await self.registry.update(_str(req, "resource"), req.get("namespace"),
                                            _object(req),
                                            field_validation=_field_validation(opts),
                                            manager=managers.current(opts),
                                            name=_str(req, "name") or None)
        return result.to_wire()

    async def UpdateStatus(self, req: Obj) -> Obj:
        result = await self.registry.update(_str(req, "resource"), req.get("namespace"),
                                            _object(req), subresource="status",
                                            manager=managers.current(_options(req)),
                                            name=_str(req, "name") or None)
        return result.to_wire()

    async def UpdateApproval(self, req: Obj) -> Obj:
        """`certificatesigningrequests/<name>/approval` (SPEC JN2): the csrapproving
        controller's Approved condition."""
        result = await self.registry.update("certificatesigningrequests", None,
                                            _object(req), subresource="approval",
                                            name=_str(req, "name") or None)
        return result.to_wire()

    async def SubjectAccessReview(self, req: Obj) -> Obj:
        """An authorization.k8s.io/v1 SubjectAccessReview (the csrapproving controller's
        question about a CSR's requester), answered by the apiserver's authorizer."""
        authorizer = self.registry.strategies.csr.authorizer or reviews.ALLOW_ALL
        answer = await reviews.review(reviews.AUTHORIZATION_GV, "subjectaccessreviews",
                                      _object(req), authorizer=authorizer,
                                      user=reviews.ANONYMOUS_ADMIN)
        return {"object": answer}

    async def Delete(self, req: Obj) -> Obj:
        opts = _options(req)
        grace = opts.get("gracePeriodSeconds")
        if grace is not None:
            grace = _int(opts, "gracePeriodSeconds")
        preconditions = opts.get("preconditions")
        if preconditions is not None and not isinstance(preconditions, dict):
            raise ApiError.bad_request("preconditions: must be a map")
        return await self.registry.delete(_str(req, "resource"), req.get("namespace"),
                                          _str(req, "name"), grace_period_seconds=grace,
                                          preconditions=preconditions,
                                          propagation_policy=opts.get("propagationPolicy"),
                                          orphan_dependents=opts.get("orphanDependents"))

    async def Bind(self, req: Obj) -> Obj:
        obj = await self.registry.bind(req.get("namespace"), _str(req, "name"),
                                       decoding.binding(_object(req)))
        return {"object": obj}

    async def Evict(self, req: Obj) -> Obj:
        return await self.registry.evict(req.get("namespace"), _str(req, "name"),
                                         req.get("object") or {})

    async def History(self, req: Obj) -> Obj:
        return await self.registry.history(_str(req, "resource"), req.get("namespace"),
                                           _str(req, "name"))

    async def Record(self, req: Obj) -> Obj:
        """`perturbations/<name>/record`: this apiserver's journal of it (issue 35)."""
        obj = await self.registry.get("perturbations", None, _str(req, "name"))
        return self.registry.perturbations.record(
            obj, since_seq=_int(_options(req), "sinceSeq"))

    async def CreateToken(self, req: Obj) -> Obj:
        """`serviceaccounts/<name>/token` (TokenRequest), for the kubelet (SPEC AX3)."""
        namespace = request_namespace(lookup("serviceaccounts"), req.get("namespace"),
                                      collection=False)
        assert namespace is not None  # serviceaccounts are namespaced
        token = await create_token(self.registry, self.tokens, namespace,
                                   _str(req, "name"),
                                   req.get("object") or {})
        return {"object": token}

    async def PodMetrics(self, req: Obj) -> Obj:
        """metrics.k8s.io PodMetrics of a namespace's pods matching `labelSelector`, fetched
        from the kubelets (the horizontal pod autoscaler's metrics client)."""
        namespace = request_namespace(lookup("pods"), req.get("namespace"), collection=True)
        return await self.metrics.pods(namespace, "", _str(_options(req), "labelSelector"))

    async def Discovery(self, req: Obj) -> Obj:
        return {"resources": [
            {"kind": k.kind, "apiVersion": k.api_version, "name": k.resource,
             "namespaced": k.namespaced, "shortNames": list(k.short_names)}
            for k in KINDS]}

    async def Watch(self, req: Obj) -> AsyncIterator[bytes]:
        """One message per event; a client that sends `batch: true` (skiff.client) gets
        every event that was ready together in one message, an array (`encode_batch`), and
        one that also sends `coalesce: true` lets a busy stream wait for the next tick."""
        opts = _options(req)
        bookmarks = bool(opts.get("allowWatchBookmarks", True))
        timeout = collection.timeout_seconds(opts.get("timeoutSeconds"))
        batched = req.get("batch") is True
        async for batch in collection.until_timeout(self.registry.watch_batches(
                _str(req, "resource"), req.get("namespace"),
                resource_version=str(opts.get("resourceVersion") or ""),
                label_selector=_str(opts, "labelSelector"),
                field_selector=_str(opts, "fieldSelector"),
                name=_str(req, "name"), coalesce=batched and req.get("coalesce") is True),
                timeout):
            parts = [ev.encoded() for ev in batch if bookmarks or ev.type != "BOOKMARK"]
            if batched and len(parts) > 1:
                # At most BATCH_LIMIT objects of at most 1.5 MiB: under MAX_MESSAGE_BYTES.
                yield encode_batch(parts)
            else:
                for part in parts:
                    yield part


def _decode_request(data: bytes, *, limit: int = MAX_OBJECT_BYTES + 64 * 1024) -> Obj:
    if len(data) > limit:
        raise ApiError(Reason.REQUEST_ENTITY_TOO_LARGE,
                       f"request is {len(data)} bytes; objects are limited to "
                       f"{MAX_OBJECT_BYTES} bytes (1.5 MiB)"
                       + (f", a batch to {limit} bytes" if limit > MAX_OBJECT_BYTES else ""))
    try:
        return decode_map(data)
    except CodecError as err:
        raise ApiError.bad_request(f"{err}; send a msgpack map (use skiff.client)") from None


async def _abort(context: grpc.aio.ServicerContext[Any, Any], err: ApiError) -> None:
    code, details, trailer = to_grpc(err)
    await context.abort(code, details, trailing_metadata=trailer)


def _internal(method: str, err: BaseException) -> ApiError:
    log.exception("unexpected error in %s", method, exc_info=err)
    return ApiError(Reason.INTERNAL_ERROR,
                    f"internal error in {method}; the apiserver log has the details")


def _leader_epoch(context: grpc.aio.ServicerContext[Any, Any]) -> LeaderEpoch | None:
    """The fencing token a leader-elected client sent (skiff.rpc.epoch), if any."""
    for key, value in context.invocation_metadata() or ():
        if key == EPOCH_METADATA:
            text = value.decode() if isinstance(value, bytes) else str(value)
            return LeaderEpoch.decode(text)
    return None


def _unary(method: str, fn: Handler, guard: RequestGuard | None) -> grpc.RpcMethodHandler:
    async def handler(data: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            # Every etcd write this request makes is checked against the epoch (storage).
            leader_epoch.set(_leader_epoch(context))
            managers.grpc_manager.set(managers.from_metadata(context.invocation_metadata()))
            req = _decode_request(data)
            if guard is not None:  # 401/403 before anything is read or stored (AU1, AU3)
                await guard.grpc(method, context, req)
            return encode(await fn(req))
        except ApiError as err:
            await _abort(context, err)
        except RecursionError:  # a client's object nested past what Python can walk
            log.warning("refused an object nested too deeply to process",
                        extra={"method": method})
            await _abort(context, ApiError.bad_request(decoding.TOO_DEEP))
        except Exception as err:  # never a stack trace to the user
            await _abort(context, _internal(method, err))
        raise AssertionError("unreachable")  # abort raises

    return grpc.unary_unary_rpc_method_handler(handler)


def _stream(method: str, fn: Callable[[Obj], AsyncIterator[bytes]],
            guard: RequestGuard | None) -> grpc.RpcMethodHandler:
    async def handler(data: bytes,
                      context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        try:
            req = _decode_request(data)
            if guard is not None:
                await guard.grpc(method, context, req)
            async for item in fn(req):
                yield item  # already encoded (shared by every watcher of the event)
        except ApiError as err:
            await _abort(context, err)
        except Exception as err:
            await _abort(context, _internal(method, err))

    return grpc.unary_stream_rpc_method_handler(handler)


def _batch(runner: BatchRunner) -> grpc.RpcMethodHandler:
    """`Batch` (endpoints.batch): the caller authenticated once, each item its own."""
    async def handler(data: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            managers.grpc_manager.set(managers.from_metadata(context.invocation_metadata()))
            req = _decode_request(data, limit=MAX_BATCH_BYTES)
            user = (await runner.guard.grpc_user(context) if runner.guard is not None
                    else None)
            return encode(await runner.run(req, user, _leader_epoch(context)))
        except ApiError as err:
            await _abort(context, err)
        except Exception as err:  # never a stack trace to the user
            await _abort(context, _internal("Batch", err))
        raise AssertionError("unreachable")  # abort raises

    return grpc.unary_unary_rpc_method_handler(handler)


def build_server(service: ApiService, *, address: str, tls: TlsFiles | None = None,
                 guard: RequestGuard | None = None, reuse_port: bool = False
                 ) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        # Off unless several apiserver processes share the port (apiserver --processes).
        ("grpc.so_reuseport", 1 if reuse_port else 0),
        # Accept the clients' keepalive pings (see skiff.client.api) instead of GOAWAY.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
        ("grpc.http2.max_ping_strikes", 0),
        # And ping clients too, so a partitioned watcher's stream is released.
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
    ])
    handlers: dict[str, grpc.RpcMethodHandler] = {
        name: _unary(name, getattr(service, name), guard)
        for name in ("Create", "Get", "List", "Update", "UpdateStatus", "Delete", "Bind",
                     "Evict", "History", "Discovery", "CreateToken", "PodMetrics", "Record",
                     "UpdateApproval", "SubjectAccessReview")
    }
    handlers["Watch"] = _stream("Watch", service.Watch, guard)
    handlers["Batch"] = _batch(BatchRunner(service.registry, {
        name: getattr(service, name) for name in BATCHABLE}, guard))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = (server.add_secure_port(address, tls.grpc_credentials()) if tls is not None
            else server.add_insecure_port(address))
    if port == 0:
        raise OSError(f"could not bind the apiserver to {address}; is the port in use?")
    return server, port, health_servicer


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
