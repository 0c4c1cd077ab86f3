"""What the fencing tests share: compressed fencing flags, a node's fence-agent annotation,
and the test playing the fence agent by moving a Fence's status through the API (the
fence-agent service is a separate component)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import rfc3339
from tests.integration.controller_manager.kubelet_double import get_or_none, wait_for

# Node monitor grace 2 s, fencing delay 2 s: a cut node is fenced ~4–5 s after its last renew.
FENCING = ["--node-monitor-grace-period", "2s", "--fencing-delay", "2s",
           "--fencing-retry-backoff", "1s"]
FENCE_AGENT = "skiff.io/fence-agent"


async def annotate_node(api: ApiClient, name: str, *, agent: str) -> None:
    """What `skiff up` and compose do for every node: name its fence agent."""
    node = await api.get("nodes", name)
    node["metadata"].setdefault("annotations", {})[FENCE_AGENT] = agent
    await api.update(node)


async def wait_for_fence(api: ApiClient, node: str, *, timeout: float = 15) -> Obj:
    fence: Obj = await wait_for(lambda: get_or_none(api, "fences", node), timeout=timeout,
                                what=f"a Fence for {node}")
    return fence


async def agent_sets_phase(api: ApiClient, node: str, phase: str, message: str = "") -> Obj:
    """The fence agent's status write: Fencing, then Fenced with `confirmedAt` (or Failed).

    Like the real agent it re-reads and retries on Conflict: the controller writes the
    Fence's status message concurrently."""
    for _ in range(10):
        fence = await api.get("fences", node)
        status = dict(fence.get("status") or {})
        status["phase"] = phase
        if message:
            status["message"] = message
        if phase == "Fenced":
            status["confirmedAt"] = rfc3339(time.time())
        fence["status"] = status
        try:
            return await api.update_status(fence)
        except ApiError as err:
            if err.reason != Reason.CONFLICT:
                raise
    raise AssertionError(f"could not write the Fence of {node}: conflicts kept coming")


async def agent_releases(api: ApiClient, node: str) -> None:
    """The agent powered the node back on: it removes its finalizer from the Fence
    (re-reading on Conflict, as the real agent does)."""
    for _ in range(10):
        fence = await get_or_none(api, "fences", node)
        if fence is None:
            return
        fence["metadata"]["finalizers"] = [
            f for f in fence["metadata"].get("finalizers") or [] if f != FENCE_AGENT]
        try:
            await api.update(fence)
            return
        except ApiError as err:
            if err.reason != Reason.CONFLICT:
                raise
    raise AssertionError(f"could not release the Fence of {node}: conflicts kept coming")


async def remove_fence(api: ApiClient, node: str) -> None:
    """Test cleanup: unfence and let the Fence go, whatever state it is in."""
    with contextlib.suppress(ApiError):
        await api.delete("fences", node)
        await agent_releases(api, node)


def has_taint(node: Obj, key: str) -> bool:
    return any(t.get("key") == key for t in node.get("spec", {}).get("taints") or [])


@contextlib.asynccontextmanager
async def watching_pods(api: ApiClient, namespace: str) -> AsyncIterator[list[Obj]]:
    """Every version of every pod of `namespace` written while inside the block, in order —
    including versions of pods that are gone by the end."""
    seen: list[Obj] = []
    rv = str((await api.list("pods", namespace))["metadata"]["resourceVersion"])

    async def watch() -> None:
        async for ev in api.watch("pods", namespace, resource_version=rv,
                                  allow_bookmarks=False):
            seen.append({"type": ev.type, "object": ev.object})

    task = asyncio.create_task(watch(), name=f"watch-pods-{namespace}")
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ApiError):
            await task
