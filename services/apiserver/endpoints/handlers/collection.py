"""Watch and collection parameters of the Kubernetes API (SPEC AX2), shared by the HTTP
and gRPC fronts: `timeoutSeconds` ends a watch cleanly (the stream simply ends, as
kube-apiserver closes it), `deletecollection` deletes what a label/field selector picks,
and `sendInitialEvents` ends the initial objects with Kubernetes' `initial-events-end`
bookmark.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from skiff.api import ApiError
from skiff.api.kinds import lookup
from skiff.api.types import Obj
from skiff.apiserver.endpoints.handlers import decoding
from skiff.apiserver.endpoints.handlers.versions import VersionView
from skiff.apiserver.registry.store import Registry
from skiff.apiserver.storage.watchcache import WatchEvent

T = TypeVar("T")

def timeout_seconds(value: Any) -> float | None:
    """`timeoutSeconds` of a watch: None when absent; a 400 naming it when malformed."""
    if value in (None, "", 0, "0"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ApiError.bad_request("timeoutSeconds: must be an integer")
    seconds = value if isinstance(value, int) else decoding.go_int("timeoutSeconds", value)
    if seconds < 0:
        raise ApiError.bad_request(f"timeoutSeconds: Invalid value: {seconds}: must be "
                                   "greater than or equal to 0")
    return float(seconds)


async def until_timeout(events: AsyncIterator[T], seconds: float | None) -> AsyncIterator[T]:
    """`events` until `seconds` have passed since the watch began (then the stream ends)."""
    items = aiter(events)
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    try:
        while True:
            if deadline is None:
                item = await anext(items)
            else:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(remaining):  # no task per item (wait_for's)
                        item = await anext(items)
                except TimeoutError:
                    return
            yield item
    except StopAsyncIteration:
        return
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


async def delete_collection(registry: Registry | VersionView, resource: str,
                            namespace: str | None, *,
                            label_selector: str = "", field_selector: str = "",
                            grace_period_seconds: int | None = None,
                            dry_run: bool = False) -> Obj:
    """DELETE on a collection: every object the selectors pick, like kube-apiserver's
    DeleteCollection; answers the list of the deleted (or deleting) objects."""
    listed = await registry.list(resource, namespace, label_selector=label_selector,
                                 field_selector=field_selector)
    deleted = []
    for item in listed["items"]:
        meta = item["metadata"]
        try:
            result = await registry.delete(resource, meta.get("namespace"), meta["name"],
                                           grace_period_seconds=grace_period_seconds,
                                           dry_run=dry_run)
        except ApiError as err:
            if err.reason == "NotFound":
                continue  # deleted meanwhile: what the caller asked for
            raise
        deleted.append(result["object"])
    return {**listed, "items": deleted}


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


async def watch_with_initial_events(registry: Registry | VersionView, resource: str,
                                    namespace: str | None, *, label_selector: str = "",
                                    field_selector: str = "") -> AsyncIterator[WatchEvent]:
    """`sendInitialEvents=true` (the streaming list client-go's WatchList uses): the current
    objects as ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"` at the
    list's resourceVersion, then the changes after it."""
    listed = await registry.list(resource, namespace, label_selector=label_selector,
                                 field_selector=field_selector)
    for item in listed["items"]:
        yield WatchEvent("ADDED", item, int(item["metadata"]["resourceVersion"]))
    revision = listed["metadata"]["resourceVersion"]
    info = lookup(resource)
    yield WatchEvent("BOOKMARK", {
        "kind": info.kind, "apiVersion": info.api_version,
        "metadata": {"resourceVersion": revision,
                     "annotations": {INITIAL_EVENTS_END: "true"}}}, int(revision))
    async for event in registry.watch(resource, namespace, resource_version=revision,
                                      label_selector=label_selector,
                                      field_selector=field_selector):
        yield event
