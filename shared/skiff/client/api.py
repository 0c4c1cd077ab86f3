"""The async API client every component uses (the only way to reach the apiserver).

Unary calls retry with exponential backoff (tenacity) while the apiserver is unavailable, up
to `retry_seconds`; API errors (NotFound, Conflict, Invalid, ...) are raised at once as
`ApiError`. `watch` is one stream from a resourceVersion; informers resume it themselves.
"""

from __future__ import annotations

import asyncio
import builtins
import ipaddress
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import grpc
import tenacity

from skiff.api.errors import ApiError, Reason
from skiff.api.kinds import lookup
from skiff.rpc import MAX_MESSAGE_BYTES, decode_map, encode, from_grpc, method_path

Obj = dict[str, Any]

_RETRYABLE = (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: Obj

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))


def _namespace_for(resource: str, namespace: str | None) -> str | None:
    info = lookup(resource)
    if not info.namespaced:
        return None
    return namespace


def _address_list(targets: str) -> str:
    """`127.0.0.1:P1,127.0.0.1:P2` (several apiservers) as gRPC's own address list, whose
    pick_first policy moves on to the next address when one fails; names that are not IPv4
    addresses cannot go in such a list, and then the first is used."""
    hosts = [t.strip().rpartition(":")[0] for t in targets.split(",")]
    try:
        for host in hosts:
            ipaddress.IPv4Address(host)
    except ValueError:
        return targets.split(",")[0].strip()
    return "ipv4:" + ",".join(t.strip() for t in targets.split(","))


class ApiClient:
    """`async with ApiClient("127.0.0.1:6443") as api: await api.get("pods", "p", "default")`."""

    def __init__(self, target: str, *, timeout: float = 30.0, retry_seconds: float = 30.0,
                 user_agent: str = "skiff", keepalive_seconds: float = 10.0) -> None:
        self.target = target.removeprefix("grpc://").removeprefix("http://")
        if "," in self.target and not self.target.startswith(("ipv4:", "ipv6:", "dns:")):
            self.target = _address_list(self.target)
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
        self._channel = grpc.aio.insecure_channel(self.target, options=self._options)
        self._generation = 0
        self._unary: dict[str, Any] = {}
        self._closed = False
        self.last_warnings: builtins.list[str] = []

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        await self._channel.close()

    async def reconnect(self, *, generation: int | None = None) -> None:
        """Replace the connection: a network partition drops packets without a reset, so a
        stream or call on the old connection could wait forever even after the network
        heals. Calls in flight on the old one fail and are retried on the new one.

        `generation` (from `self.generation`) makes concurrent callers that saw the same
        dead connection replace it once."""
        if self._closed or (generation is not None and generation != self._generation):
            return
        old = self._channel
        self._channel = grpc.aio.insecure_channel(self.target, options=self._options)
        self._generation += 1
        self._unary = {}
        await old.close(grace=None)

    @property
    def generation(self) -> int:
        return self._generation

    # -- transport -----------------------------------------------------------------------

    async def call(self, method: str, request: Obj, *, retry: bool = True) -> Obj:
        async def once() -> Obj:
            generation = self._generation
            stub = self._unary.get(method)
            if stub is None:
                stub = self._unary[method] = self._channel.unary_unary(method_path(method))
            try:
                data = await stub(encode(request), timeout=self.timeout)
            except grpc.aio.AioRpcError as err:
                code = err.code()
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    await self.reconnect(generation=generation)
                if code == grpc.StatusCode.CANCELLED and not self._closed:
                    # Our own reconnect cut it off; the call never reached a verdict.
                    raise ApiError(Reason.SERVICE_UNAVAILABLE,
                                   f"connection to {self.target} was replaced") from None
                raise from_grpc(err, target=self.target) from None
            return decode_map(data)

        if not retry:
            return await once()
        try:
            async for attempt in tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception(
                    lambda e: isinstance(e, ApiError) and e.reason in _RETRYABLE),
                wait=tenacity.wait_exponential(multiplier=0.05, max=2.0)
                + tenacity.wait_random(0, 0.05),
                stop=tenacity.stop_after_delay(self.retry_seconds),
                reraise=True,
            ):
                with attempt:
                    return await once()
        except asyncio.CancelledError:
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- verbs ---------------------------------------------------------------------------

    async def create(self, obj: Obj, *, namespace: str | None = None,
                     field_validation: str = "Warn") -> Obj:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if not kind:
            raise ApiError.bad_request("kind: Required value (which kind of object is this?)")
        resource = lookup(str(kind)).resource
        ns = namespace or obj.get("metadata", {}).get("namespace")
        resp = await self.call("Create", {
            "resource": resource, "namespace": _namespace_for(resource, ns), "object": obj,
            "options": {"fieldValidation": field_validation}})
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
                   revision: int = 0) -> Obj:
        """A `<Kind>List` with `items` and `metadata.resourceVersion`."""
        return await self.call("List", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "options": {"labelSelector": label_selector, "fieldSelector": field_selector,
                        "revision": revision}})

    async def update(self, obj: Obj, *, field_validation: str = "Warn") -> Obj:
        resource = lookup(str(obj.get("kind", ""))).resource
        resp = await self.call("Update", {
            "resource": resource,
            "namespace": _namespace_for(resource, obj.get("metadata", {}).get("namespace")),
            "object": obj, "options": {"fieldValidation": field_validation}})
        return dict(resp["object"])

    async def update_status(self, obj: Obj) -> Obj:
        resource = lookup(str(obj.get("kind", ""))).resource
        resp = await self.call("UpdateStatus", {
            "resource": resource,
            "namespace": _namespace_for(resource, obj.get("metadata", {}).get("namespace")),
            "object": obj})
        return dict(resp["object"])

    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     resource_version: str | None = None) -> Obj:
        """`{"object": ..., "deleted": bool}`: deleted is False while it is terminating."""
        options: Obj = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        if preconditions:
            options["preconditions"] = preconditions
        return await self.call("Delete", {
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name, "options": options})

    async def bind(self, namespace: str, name: str, node_name: str, *,
                   uid: str | None = None) -> Obj:
        binding: Obj = {"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name, "namespace": namespace},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        if uid:
            binding["metadata"]["uid"] = uid
        resp = await self.call("Bind", {"namespace": namespace, "name": name,
                                        "object": binding})
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

    async def discovery(self) -> builtins.list[Obj]:
        return list((await self.call("Discovery", {}))["resources"])

    async def watch(self, resource: str, namespace: str | None = None, *,
                    resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", name: str = "",
                    allow_bookmarks: bool = True) -> AsyncGenerator[WatchEvent, None]:
        """One watch stream. Raises ApiError(Gone) for a compacted resourceVersion and
        ApiError(ServiceUnavailable) when the stream breaks; resume from the last rv."""
        stub = self._channel.unary_stream(method_path("Watch"))
        call = stub(encode({
            "resource": resource, "namespace": _namespace_for(resource, namespace),
            "name": name,
            "options": {"resourceVersion": resource_version, "labelSelector": label_selector,
                        "fieldSelector": field_selector,
                        "allowWatchBookmarks": allow_bookmarks}}))
        try:
            async for data in call:
                msg = decode_map(data)
                yield WatchEvent(str(msg["type"]), dict(msg["object"]))
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.CANCELLED and not self._closed:
                raise ApiError(Reason.SERVICE_UNAVAILABLE,
                               f"connection to {self.target} was replaced") from None
            raise from_grpc(err, target=self.target) from None
        finally:
            call.cancel()
