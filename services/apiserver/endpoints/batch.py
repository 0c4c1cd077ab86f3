"""Batched writes on the gRPC API (issue 37): many requests in one message, each its own.

grpcio costs about as much per call as Skiff's whole handling of a small write, so the
busiest writers (the scheduler's bindings, every component's Events, the kubelets' status
and Lease updates) send their writes together. A `Batch` call carries
`{"items": [{"method": M, <the request M takes alone>, "fenced": bool}, ...]}` with M one
of `BATCHABLE`. Nothing about a write changes in a batch:

- each item is authorized (and admitted) as the request it would be alone — the caller is
  authenticated once, a batch being one caller's — so one forbidden item fails alone;
- each item is its own etcd transaction with its own resourceVersion, run concurrently
  with the others on the apiserver's etcd client; items that address the same object run
  one after another in the order sent, so a batch never reorders a client's writes to one
  object;
- the answer holds one result per item, in the items' order: `{"ok": <what M answers>}`
  or `{"error": <Status>}`; `fenced` items carry the call's leader epoch (skiff.rpc.epoch);
- each item is traced as the call it would be alone (`/skiff.v1.Api/Bind`), in the trace of
  the caller that wrote it (its `traceparent`), linked to the batch's span.

A client whose apiserver went away before it answered sends the same items again marked
`resent: true`. An item of a resent batch whose write already landed — a Create whose
object is stored as sent, a Bind to the node the pod is already on, an update whose content
is stored — is answered with the stored object and not written again; the others are
written now. So across a failover no item is lost and none is applied twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.endpoints.guard import RequestGuard
from skiff.apiserver.endpoints.handlers import decoding
from skiff.apiserver.registry.store import Registry
from skiff.apiserver.storage.fencing import leader_epoch
from skiff.auth import UserInfo
from skiff.rpc.epoch import LeaderEpoch
from skiff.tracing import start_item_span, tracer

log = logging.getLogger(__name__)
_tracer = tracer("skiff.apiserver.batch")

BATCHABLE: Final = frozenset({"Create", "Update", "UpdateStatus", "Bind"})
# A batch is one message: bounded like one (the client's Batcher sends at most its N).
MAX_ITEMS: Final = 1000
# Transactions of one batch in flight on the etcd client at once.
CONCURRENCY: Final = 64
# Server-set metadata that a resent write cannot know in advance.
_SERVER_SET = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")

Handler = Callable[[Obj], Awaitable[Obj]]


def _object_key(item: Obj) -> tuple[str, str, str]:
    """The object an item writes, for keeping one object's writes in order."""
    obj = item.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = item.get("name") or (meta.get("name") if isinstance(meta, dict) else "") or ""
    resource = "pods" if item.get("method") == "Bind" else item.get("resource")
    return str(resource or ""), str(item.get("namespace") or ""), str(name)


def contains(have: Any, want: Any) -> bool:
    """`want`'s every field is in `have` with the same value (lists element by element):
    a stored object still holding what a client sent, defaults the server added aside."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(have, list) and len(have) == len(want)
                and all(contains(h, w) for h, w in zip(have, want, strict=True)))
    return bool(have == want)


def _as_sent(obj: Obj) -> Obj:
    """What of a sent object must be stored for the write to have landed."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_SET}
    return {**obj, "metadata": meta}


class BatchRunner:
    """Runs a `Batch` call's items through the service's own methods."""

    def __init__(self, registry: Registry, handlers: dict[str, Handler],
                 guard: RequestGuard | None) -> None:
        self.registry = registry
        self.handlers = handlers
        self.guard = guard

    async def run(self, req: Obj, user: UserInfo | None, epoch: LeaderEpoch | None) -> Obj:
        items = req.get("items")
        if not isinstance(items, list) or not items:
            raise ApiError.bad_request("items: Required value (a list of requests)")
        if len(items) > MAX_ITEMS:
            raise ApiError.bad_request(f"items: at most {MAX_ITEMS} requests a batch, "
                                       f"got {len(items)}; send several batches")
        resent = req.get("resent") is True
        results: list[Obj] = [{} for _ in items]
        chains: dict[tuple[str, str, str], list[int]] = {}
        for i, item in enumerate(items):
            key = _object_key(item) if isinstance(item, dict) else ("", "", str(i))
            chains.setdefault(key, []).append(i)
        slots = asyncio.Semaphore(CONCURRENCY)

        async def chain(indices: list[int]) -> None:
            for i in indices:
                async with slots:
                    item = items[i] if isinstance(items[i], dict) else {}
                    method = item.get("method")
                    name = f"/skiff.v1.Api/{method if method in BATCHABLE else 'Batch'}"
                    with start_item_span(_tracer, name, item.get("traceparent")):
                        results[i] = await self._one(i, items[i], user, epoch, resent)

        # Each chain is a task of its own: the leader epoch and the user set for one item
        # (context variables) are not seen by another's.
        await asyncio.gather(*(chain(indices) for indices in chains.values()))
        return {"results": results}

    async def _one(self, index: int, item: Any, user: UserInfo | None,
                   epoch: LeaderEpoch | None, resent: bool) -> Obj:
        try:
            if not isinstance(item, dict):
                raise ApiError.bad_request(f"items[{index}]: must be a map")
            method = item.get("method")
            handler = self.handlers.get(method) if isinstance(method, str) else None
            if handler is None or method not in BATCHABLE:
                raise ApiError.bad_request(
                    f"items[{index}].method: {method!r} cannot be batched; use one of "
                    f"{', '.join(sorted(BATCHABLE))}, or call it alone")
            leader_epoch.set(epoch if item.get("fenced") is True else None)
            if self.guard is not None and user is not None:
                await self.guard.grpc_authorize(method, user, item)
            if resent and (landed := await self._landed(method, item, user)) is not None:
                return {"ok": landed}
            return {"ok": await handler(item)}
        except ApiError as err:
            return {"error": err.to_status()}
        except RecursionError:
            return {"error": ApiError.bad_request(decoding.TOO_DEEP).to_status()}
        except Exception:  # one item's bug answers that item, never the batch
            log.exception("unexpected error in a batched request", extra={"item": index})
            return {"error": ApiError(
                Reason.INTERNAL_ERROR,
                "internal error in a batched request; the apiserver log has the details"
            ).to_status()}

    async def _landed(self, method: str, item: Obj, user: UserInfo | None) -> Obj | None:
        """The answer for a resent item whose write landed before the failover (read, not
        written again), or None to make the write now. The stored object is only answered
        to a caller who may `get` it: a create-only caller must not learn what an existing
        object holds by resending a part of it (it gets the write's AlreadyExists)."""
        obj = item.get("object")
        if not isinstance(obj, dict):
            return None
        if method == "Bind":
            if not await self._may_get(user, "pods", item.get("namespace"),
                                       str(item.get("name"))):
                return None
            pod = await self._stored("pods", item.get("namespace"), str(item.get("name")))
            target = (obj.get("target") or {}).get("name")
            uid = (obj.get("metadata") or {}).get("uid")
            if (pod is None or (pod.get("spec") or {}).get("nodeName") != target
                    or (uid and pod["metadata"].get("uid") != uid)):
                return None
            return {"object": pod}
        meta = obj.get("metadata") or {}
        name = str(item.get("name") or meta.get("name") or "")
        if not await self._may_get(user, str(item.get("resource")), item.get("namespace"),
                                   name):
            return None
        stored = await self._stored(str(item.get("resource")), item.get("namespace"), name)
        if stored is None:
            return None
        if method == "UpdateStatus":
            landed = contains(stored.get("status"), obj.get("status"))
        else:
            landed = contains(stored, _as_sent(obj))
        return {"object": stored} if landed else None

    async def _may_get(self, user: UserInfo | None, resource: str, namespace: Any,
                       name: str) -> bool:
        if self.guard is None or user is None:
            return True  # the insecure front authorizes nothing
        try:
            await self.guard.grpc_authorize("Get", user, {
                "resource": resource, "namespace": namespace, "name": name})
        except ApiError:
            return False
        return True

    async def _stored(self, resource: str, namespace: Any, name: str) -> Obj | None:
        try:
            return await self.registry.get(resource, namespace if isinstance(namespace, str)
                                           else None, name)
        except ApiError:
            return None
