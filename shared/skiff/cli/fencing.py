"""`skiff fence` and `skiff unfence` (SPEC FN1): a Fence object for a node, and its end.

A fence names its agent (the node's `skiff.io/fence-agent` annotation, or `--agent`); the
agent's finalizer on it goes once the node is unfenced, which `unfence` waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.api.wellknown import FENCE_AGENT_ANNOTATION, FENCE_FINALIZER
from skiff.cli.resources import CliError, Out
from skiff.client import ApiClient

FENCE_AGENTS = ("power", "network", "storage")


@contextlib.contextmanager
def _not_found(message: str) -> Iterator[None]:
    """A NotFound from the API inside becomes a CliError saying `message`."""
    try:
        yield
    except ApiError as e:
        if e.reason == Reason.NOT_FOUND:
            raise CliError(message) from None
        raise


async def fence(api: ApiClient, node: str, *, agent: str | None, reason: str | None,
                requested_by: str, out: Out) -> None:
    """Create the node's Fence; the fence agent does the rest (`skiff get fences`)."""
    with _not_found(f'node "{node}" not found; `skiff get nodes` lists them'):
        node_obj = await api.get("nodes", node)
    if agent is None:
        annotations = node_obj["metadata"].get("annotations") or {}
        agent = annotations.get(FENCE_AGENT_ANNOTATION)
        if not agent or agent == "none":
            raise CliError(f'node "{node}" has no {FENCE_AGENT_ANNOTATION} annotation naming '
                           f"its agent; pass --agent {'|'.join(FENCE_AGENTS)}")
    if agent not in FENCE_AGENTS:
        raise CliError(f"--agent: {agent!r} is not one of {', '.join(FENCE_AGENTS)}")
    body: Obj = {"apiVersion": "skiff.io/v1", "kind": "Fence",
                 "metadata": {"name": node, "finalizers": [FENCE_FINALIZER]},
                 "spec": {"nodeName": node, "agent": agent,
                          "reason": reason or "requested with skiff fence",
                          "requestedBy": requested_by}}
    try:
        await api.create(body)
    except ApiError as e:
        if e.reason != Reason.ALREADY_EXISTS:
            raise
        current = await api.get("fences", node)
        raise CliError(f'node "{node}" is already fenced (phase '
                       f'{current.get("status", {}).get("phase")}); `skiff unfence {node}` '
                       "first") from None
    out(f'fence.skiff.io/{node} created (agent {agent}); watch it with `skiff get fences`')


async def unfence(api: ApiClient, node: str, *, timeout: float, out: Out,
                  interval: float = 0.2) -> None:
    """Delete the node's Fence and wait until the fence agent has given the node back."""
    with _not_found(f'node "{node}" is not fenced (no fence "{node}")'):
        result = await api.delete("fences", node)
    uid = result["object"]["metadata"].get("uid")
    last: str | None = None
    message = ""
    deadline = asyncio.get_running_loop().time() + timeout
    while not result.get("deleted"):
        try:
            obj = await api.get("fences", node)
        except ApiError as e:
            if e.reason == Reason.NOT_FOUND:
                break
            raise
        if obj["metadata"].get("uid") != uid:
            break
        phase = str(obj.get("status", {}).get("phase", ""))
        message = str(obj.get("status", {}).get("message", ""))
        if phase != last:
            out(f"fence.skiff.io/{node} {phase}: {message}".rstrip(": "))
            last = phase
        if asyncio.get_running_loop().time() > deadline:
            raise CliError(f'fence "{node}" is still {phase} after {timeout:g}s ({message}); '
                           "is the fence agent running? (`skiff status`)")
        await asyncio.sleep(interval)
    out(f"fence.skiff.io/{node} deleted: node {node} is unfenced")
