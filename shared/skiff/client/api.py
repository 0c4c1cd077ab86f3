"""The async API client every component uses (the only way to reach the apiserver).

Unary calls retry with exponential backoff (tenacity) while the apiserver is unavailable, up
to `retry_seconds`; API errors (NotFound, Conflict, Invalid, ...) are raised at once as
`ApiError`. `watch` is one stream from a resourceVersion; informers resume it themselves.

The target may name several apiservers, comma-separated (`127.0.0.1:6443,127.0.0.1:6444`,
as every `--apiserver` flag, `--server` and `SKIFF_SERVER` accept): the client talks to one
at a time and moves to the next when that one is unreachable or answers ServiceUnavailable
or Timeout (e.g. it lost etcd). Every apiserver serves the same etcd revisions, so a watch
resumed on another one from the last resourceVersion loses and repeats nothing.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import grpc
import tenacity

from skiff.api.errors import ApiError, Reason
from skiff.api.kinds import lookup, lookup_kind
from skiff.api.types import Obj
from skiff.client.batch import DEFAULT_MAX_DELAY, DEFAULT_MAX_ITEMS, Batcher
from skiff.client.credentials import Credentials
from skiff.client.interface import Client, WatchEvent
from skiff.rpc import MAX_MESSAGE_BYTES, decode_map, decode_maps, encode, from_grpc, method_path
from skiff.rpc.epoch import EPOCH_METADATA, LeaderEpoch
from skiff.tracing import current_traceparent

log = logging.getLogger(__name__)


_RETRYABLE = (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT)
# Every write to these carries the leader epoch (see skiff.rpc.epoch), as do bindings and
# deletes with grace 0.
FENCED_RESOURCES = frozenset({"fences", "volumeattachments"})
# What a batching client batches besides bindings and status updates: the writes nobody
# waits on (Events, Lease renewals). A controller's other writes stay calls of their own,
# so a reconcile that writes one object after another waits for no batch.
BATCHED_RESOURCES = frozenset({"events", "leases"})


def _resendable(method: str, request: Obj) -> bool:
    """A write the apiserver can recognise as landed when resent (endpoints.batch): not a
    Create by generateName, whose first try's object has a name the client never saw."""
    if method not in ("Create", "Update", "UpdateStatus", "Bind"):
        return False
    obj = request.get("object")
    return method != "Create" or bool(isinstance(obj, dict)
                                      and (obj.get("metadata") or {}).get("name"))


def parse_targets(target: str) -> list[str]:
    """`"grpc://a:1, b:2"` → `["a:1", "b:2"]`: the apiservers of a comma-separated list."""
    targets = [t.strip().removeprefix("grpc://").removeprefix("http://")
               .removeprefix("https://") for t in target.split(",")]
    targets = [t for t in targets if t]
    if not targets:
        raise ValueError(f"no apiserver address in {target!r} (want HOST:PORT[,HOST:PORT...])")
    return targets


def _namespace_for(resource: str, namespace: str | None) -> str | None:
    """The namespace to send: none for a cluster-scoped kind; the caller's for a kind this
    process does not know (a custom resource whose CRD it does not follow: the apiserver
    knows it)."""
    try:
        info = lookup(resource)
    except ApiError:
        return namespace
    if not info.namespaced:
        return None
    return namespace


def _resource_of(obj: Obj) -> str:
    """The resource an object's apiVersion and kind name, as the registry addresses it
    (a custom resource by `<plural>.<group>`: its kind or plural may be another's)."""
    kind = str(obj.get("kind", ""))
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str) and api_version:
        try:
            return lookup_kind(api_version, kind).ref
        except ApiError:
            pass
    return lookup(kind).ref


class ApiClient:
    """`async with ApiClient("127.0.0.1:6443") as api: await api.get("pods", "p", "default")`.

    `ApiClient("127.0.0.1:6443,127.0.0.1:6444")` fails over between two apiservers."""

    def __init__(self, target: str, *, timeout: float = 30.0, retry_seconds: float = 30.0,
                 user_agent: str = "skiff", keepalive_seconds: float = 10.0,
                 credentials: Credentials | None = None, batch: bool = False,
                 batch_items: int = DEFAULT_MAX_ITEMS,
                 batch_delay: float = DEFAULT_MAX_DELAY,
                 batch_resources: frozenset[str] = BATCHED_RESOURCES) -> None:
        self.targets = parse_targets(target)
        # TLS and who we are: given, or from the environment `skiff up` sets (AU1).
        self.credentials = credentials if credentials is not None else \
            Credentials.from_env()
        self._index = 0
        self.failovers = 0
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self._options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.primary_user_agent", user_agent),
            ("grpc.enable_retries", 0),
            # Our own connection, so `reconnect` really opens a new one.
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.keepalive_time_ms", int(keepalive_seconds * 1000)),
            ("grpc.keepalive_timeout_ms", int(keepalive_seconds * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        self._channel = self.credentials.channel(self.target, self._options)
        self._bearer = self.credentials.bearer()
        self._generation = 0
        self._unary: dict[str, Any] = {}
        self._closed = False
        self.last_warnings: builtins.list[str] = []
        # Set by a LeaderElector while this client's owner leads: destructive writes then
        # carry it and the apiserver refuses them once another leader took the Lease.
        self.leader_epoch: LeaderEpoch | None = None
        # `batch`: bindings, status updates and creates/updates of `batch_resources` wait
        # up to `batch_delay` s to share one `Batch` call (skiff.client.batch, issue 37).
        self.batch_resources = batch_resources
        self.batcher = (Batcher(self._send_batch, max_items=batch_items,
                                max_delay=batch_delay) if batch else None)

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.batcher is not None:
            await self.batcher.close()
        self._closed = True
        await self._channel.close()

    @property
    def target(self) -> str:
        """The apiserver in use now."""
        return self.targets[self._index]

    async def reconnect(self, *, generation: int | None = None) -> None:
        """Replace the connection: a network partition drops packets without a reset, so a
        stream or call on the old connection could wait forever even after the network
        heals. Calls in flight on the old one fail and are retried on the new one. With
        several apiservers the new connection goes to the next one.

        `generation` (from `self.generation`) makes concurrent callers that saw the same
        dead connection replace it once."""
        if self._closed or (generation is not None and generation != self._generation):
            return
        if len(self.targets) > 1:
            old_target = self.target
            self._index = (self._index + 1) % len(self.targets)
            self.failovers += 1
            log.warning("apiserver unavailable; failing over",
                        extra={"from": old_target, "to": self.target})
        old = self._channel
        self._channel = self.credentials.channel(self.target, self._options)
        self._generation += 1
        self._unary = {}
        await old.close(grace=None)

    @property
    def generation(self) -> int:
        return self._generation

    # -- transport -----------------------------------------------------------------------

    async def _failed(self, err: grpc.aio.AioRpcError, generation: int) -> ApiError:
        """The ApiError for a failed call or stream; moves to the next apiserver (or, with
        one, reconnects after a deadline) when this one looks unavailable."""
        code = err.code()
        target = self.target
        if code == grpc.StatusCode.CANCELLED and not self._closed:
            # Our own reconnect cut it off; the call never reached a verdict.
            return ApiError(Reason.SERVICE_UNAVAILABLE,
                            f"connection to {target} was replaced")
        api_err = from_grpc(err, target=target)
        if api_err.reason == Reason.UNAUTHORIZED and self._bearer is None:
            api_err = ApiError(Reason.UNAUTHORIZED, (
                "Unauthorized: this client has no credentials (set SKIFF_CLIENT_CERT_FILE "
                "and SKIFF_CLIENT_KEY_FILE, or SKIFF_TOKEN, or use the kubeconfig `skiff up` "
                "wrote)"))
        if code == grpc.StatusCode.DEADLINE_EXCEEDED or (
                len(self.targets) > 1 and api_err.reason in _RETRYABLE):
            await self.reconnect(generation=generation)
        return api_err

    def _replaced(self, generation: int) -> ApiError | None:
        """What to raise for a CancelledError out of a call or stream begun at `generation`.

        grpc.aio cancels every call still open on a channel when it is closed, and reports
        that to the caller as asyncio.CancelledError, not as an RPC error. When our own
        `reconnect` (perhaps triggered by another caller sharing this client) closed the
        channel under the call, that is a broken connection to retry on the new one; were it
        left a CancelledError it would silently end the caller's task (an informer, a
        kubelet's watch of its pods). A real cancellation of the caller's task stays one."""
        task = asyncio.current_task()
        if (self._closed or generation == self._generation
                or (task is not None and task.cancelling())):
            return None
        return ApiError(Reason.SERVICE_UNAVAILABLE,
                        f"connection replaced by a failover to {self.target}; retrying")

    def _metadata(self, fenced: bool = False) -> tuple[tuple[str, str], ...] | None:
        """Who we are (a certificate token or bearer token) and, for a destructive write
        while our owner leads, the leader epoch for the apiserver to check."""
        metadata: tuple[tuple[str, str], ...] = ()
        if self._bearer is not None:
            metadata += (("authorization", f"Bearer {self._bearer()}"),)
        epoch = self.leader_epoch
        if fenced and epoch is not None:
            metadata += ((EPOCH_METADATA, epoch.encode()),)
        return metadata or None

    def _retrying(self) -> tenacity.AsyncRetrying:
        """Exponential backoff while the apiserver is unavailable, up to `retry_seconds`."""
        return tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(
                lambda e: isinstance(e, ApiError) and e.reason in _RETRYABLE),
            wait=tenacity.wait_exponential(multiplier=0.05, max=2.0)
            + tenacity.wait_random(0, 0.05),
            stop=tenacity.stop_after_delay(max(self.retry_seconds, 0)),
            reraise=True)

    async def call(self, method: str, request: Obj, *, retry: bool = True,
                   fenced: bool = False) -> Obj:
        """One RPC; `fenced` sends the leader epoch (if any) for the apiserver to check."""
        async def once() -> Obj:
            generation = self._generation
            stub = self._unary.get(method)
            if stub is None:
                stub = self._unary[method] = self._channel.unary_unary(method_path(method))
            try:
                data = await stub(encode(request), timeout=self.timeout,
                                  metadata=self._metadata(fenced))
            except grpc.aio.AioRpcError as err:
                raise await self._failed(err, generation) from None
            except asyncio.CancelledError:
                if (replaced := self._replaced(generation)) is None:
                    raise
                raise replaced from None
            return decode_map(data)

        if not retry:
            return await once()
        try:
            return await once()  # the usual case, without building a retry loop per call
        except ApiError as err:
            if err.reason not in _RETRYABLE or self.retry_seconds <= 0:
                raise
        await asyncio.sleep(0.05 + random.uniform(0, 0.05))  # the loop's first wait
        resend = _resendable(method, request)
        try:
            async for attempt in self._retrying():
                with attempt:
                    if resend:
                        return await self._resend(method, request, fenced)
                    return await once()
        except asyncio.CancelledError:
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _resend(self, method: str, request: Obj, fenced: bool) -> Obj:
        """A write whose first try may have landed (the apiserver went away, or timed out,
        before it answered), sent again as a one-item `Batch` marked resent: the apiserver
        answers a write that landed with the stored object instead of writing it again, so
        a retried Create is not answered AlreadyExists by its own first try."""
        item = {**request, "method": method, "fenced": fenced}
        resp = await self.call("Batch", {"items": [item], "resent": True}, retry=False,
                               fenced=fenced)
        (result,) = resp["results"]
        if "error" in result:
            raise ApiError.from_status(result["error"])
        return dict(result.get("ok") or {})

    async def _write(self, method: str, request: Obj, *, fenced: bool,
                     batchable: bool = True) -> Obj:
        """A write: in the next batch when this client batches, else a call of its own."""
        if self.batcher is None or not batchable:
            return await self.call(method, request, fenced=fenced)
        item = {**request, "method": method, "fenced": fenced}
        if (traceparent := current_traceparent()) is not None:
            item["traceparent"] = traceparent  # the apiserver's span joins this caller's trace
        return await self.batcher.submit(item)

    async def _send_batch(self, items: builtins.list[Obj]) -> builtins.list[Obj]:
        """One `Batch` call, resent (marked so) while the apiserver is unavailable: the
        apiserver answers an item that landed before the failover as landed."""
        fenced = any(item.get("fenced") for item in items)
        async for attempt in self._retrying():
            with attempt:
                resent = attempt.retry_state.attempt_number > 1
                resp = await self.call("Batch", {"items": items, "resent": resent},
                                       retry=False, fenced=fenced)
                return list(resp["results"])
        raise AssertionError("unreachable")  # pragma: no cover

    # -- verbs ---------------------------------------------------------------------------

    async def create(self, obj: Obj, *, namespace: str | None = None,
                     field_validation: str = "Warn") -> Obj:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if not kind:
            raise ApiError.bad_request("kind: Required value (which kind of object is this?)")
        resource = _resource_of(obj)
        ns = namespace or obj.get("metadata", {}).get("namespace")
        # generateName is never batched: resent after a failover it would create twice
        resp = await self._write("Create", {
            "resource": resource, "namespace": _namespace_for(resource, ns), "object": obj,
            "options": {"fieldValidation": field_validation}},
            fenced=resource in FENCED_RESOURCES,
            batchable=resource in self.batch_resources and bool(
                (obj.get("metadata") or {}).get("name")))
        self.last_warnings = list(resp.get("warnings", []))
        return dict(resp["object"])

    async def get(self, resource: str, name: str, namespace: str | None = None, *,
                  revision: int = 0) -> Obj:
        resp = await self.call("Get", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name, "options": {"revision": revision}})
        return dict(resp["object"])

    async def list(self, resource: str, namespace: str | None = None, *,
                   label_selector: str = "", field_selector: str = "",
                   revision: int = 0, limit: int = 0, continue_token: str = "") -> Obj:
        """A `<Kind>List` with `items` and `metadata.resourceVersion`; with `limit`, one page
        and `metadata.continue` naming the next (see `list_pages`)."""
        options: Obj = {"labelSelector": label_selector, "fieldSelector": field_selector,
                        "revision": revision}
        if limit:
            options["limit"] = limit
        if continue_token:
            options["continue"] = continue_token
        return await self.call("List", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "options": options})

    async def list_pages(self, resource: str, namespace: str | None = None, *,
                         label_selector: str = "", field_selector: str = "",
                         page_size: int = 500) -> Obj:
        """The whole list, fetched `page_size` objects a request (one consistent revision,
        as Kubernetes' pager does), so no single reply has to hold it all."""
        items: list[Obj] = []
        token = ""
        while True:
            page = await self.list(resource, namespace, label_selector=label_selector,
                                   field_selector=field_selector, limit=page_size,
                                   continue_token=token)
            items.extend(page["items"])
            token = str(page.get("metadata", {}).get("continue") or "")
            if not token:
                meta = {"resourceVersion": page["metadata"]["resourceVersion"]}
                return {**page, "metadata": meta, "items": items}

    async def update(self, obj: Obj, *, field_validation: str = "Warn") -> Obj:
        resource = _resource_of(obj)
        resp = await self._write("Update", {
            "resource": resource,
            "namespace": _namespace_for(resource, obj.get("metadata", {}).get("namespace")),
            "object": obj, "options": {"fieldValidation": field_validation}},
            fenced=resource in FENCED_RESOURCES,
            batchable=resource in self.batch_resources)
        return dict(resp["object"])

    async def update_status(self, obj: Obj) -> Obj:
        resource = _resource_of(obj)
        resp = await self._write("UpdateStatus", {
            "resource": resource,
            "namespace": _namespace_for(resource, obj.get("metadata", {}).get("namespace")),
            "object": obj}, fenced=resource in FENCED_RESOURCES)
        return dict(resp["object"])

    async def update_approval(self, obj: Obj) -> Obj:
        """A CertificateSigningRequest's `approval` subresource (its Approved/Denied
        conditions; SPEC JN2)."""
        resp = await self.call("UpdateApproval", {"resource": "certificatesigningrequests",
                                                  "object": obj})
        return dict(resp["object"])

    async def subject_access_review(self, review: Obj) -> Obj:
        """Ask the apiserver's authorizer about someone else (a SubjectAccessReview)."""
        resp = await self.call("SubjectAccessReview", {"object": review})
        return dict(resp["object"])

    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     resource_version: str | None = None,
                     propagation_policy: str | None = None) -> Obj:
        """`{"object": ..., "deleted": bool}`: deleted is False while it is terminating."""
        options: Obj = {}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        if preconditions:
            options["preconditions"] = preconditions
        return await self.call("Delete", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name, "options": options},
            fenced=grace_period_seconds == 0 or resource in FENCED_RESOURCES)

    async def bind(self, namespace: str, name: str, node_name: str, *,
                   uid: str | None = None) -> Obj:
        binding: Obj = {"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name, "namespace": namespace},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        if uid:
            binding["metadata"]["uid"] = uid
        resp = await self._write("Bind", {"namespace": namespace, "name": name,
                                          "object": binding}, fenced=True)
        return dict(resp["object"])

    async def evict(self, namespace: str, name: str, *,
                    grace_period_seconds: int | None = None) -> Obj:
        eviction: Obj = {"apiVersion": "policy/v1", "kind": "Eviction",
                         "metadata": {"name": name, "namespace": namespace}}
        if grace_period_seconds is not None:
            eviction["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        return await self.call("Evict", {"namespace": namespace, "name": name,
                                         "object": eviction})

    async def history(self, resource: str, name: str,
                      namespace: str | None = None) -> builtins.list[Obj]:
        """Every version still in etcd: `[{"revision", "type", "object"}]`, oldest first."""
        resp = await self.call("History", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name})
        return list(resp["items"])

    async def create_token(self, namespace: str, name: str, request: Obj) -> Obj:
        """TokenRequest for ServiceAccount `namespace/name`: the answer's
        `status.token` and `status.expirationTimestamp` (SPEC AX3)."""
        resp = await self.call("CreateToken", {"namespace": namespace, "name": name,
                                               "object": request})
        return dict(resp["object"])

    async def pod_metrics(self, namespace: str, *, label_selector: str = "") -> builtins.list[Obj]:
        """metrics.k8s.io PodMetrics (`metadata`, `timestamp`, `window`, `containers:
        [{name, usage: {cpu, memory}}]`) of the namespace's scheduled pods matching the
        selector that the kubelets have measured (as metrics-server answers)."""
        resp = await self.call("PodMetrics", {"namespace": namespace,
                                              "options": {"labelSelector": label_selector}})
        return list(resp["items"])

    async def discovery(self) -> builtins.list[Obj]:
        return list((await self.call("Discovery", {}))["resources"])

    async def watch(self, resource: str, namespace: str | None = None, *,
                    resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", name: str = "",
                    allow_bookmarks: bool = True, timeout_seconds: int | None = None,
                    coalesce: bool = False) -> AsyncGenerator[WatchEvent, None]:
        """One watch stream. Raises ApiError(Gone) for a compacted resourceVersion and
        ApiError(ServiceUnavailable) when the stream breaks; resume from the last rv.
        `timeout_seconds`: the server ends the stream (cleanly) after that long (AX2).
        `coalesce`: see `Client.watch`."""
        generation = self._generation
        stub = self._channel.unary_stream(method_path("Watch"))
        call = stub(encode({
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name, "batch": True, **({"coalesce": True} if coalesce else {}),
            "options": {"resourceVersion": resource_version, "labelSelector": label_selector,
                        "fieldSelector": field_selector,
                        "allowWatchBookmarks": allow_bookmarks,
                        **({"timeoutSeconds": timeout_seconds} if timeout_seconds else {})}}),
                    metadata=self._metadata())
        try:
            async for data in call:
                # Several events that were ready together come as one message (batch).
                for msg in decode_maps(data):
                    yield WatchEvent(str(msg["type"]), msg["object"])
        except grpc.aio.AioRpcError as err:
            raise await self._failed(err, generation) from None
        except asyncio.CancelledError:
            if (replaced := self._replaced(generation)) is None:
                raise
            raise replaced from None
        finally:
            call.cancel()


if TYPE_CHECKING:
    # mypy checks here that the real client has every verb of the protocol, as declared.
    _SATISFIES_CLIENT: type[Client] = ApiClient
