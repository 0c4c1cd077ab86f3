"""The `FenceAgent` seam (SPEC FN2): what the fence-agent service needs from a fencing method.

An agent is out-of-band access to one kind of node resource, like a BMC for power or a
switch for the network. Every method is idempotent, because the service re-runs it after
its own crash or a conflict: `fence` cuts the node off and returns a one-line message of
what it did; `status` re-checks from scratch whether the node is cut off now (the
confirmation the fencing controller waits for, FN3); `unfence` undoes the cut. A method
that cannot do its job raises `FenceError` with a message saying what failed, where, and
what to do; it never reports success it did not check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["FenceAgent", "FenceError", "FenceStatus", "UnsupportedAgent"]


class FenceError(Exception):
    """An agent could not fence, unfence or check a node; the message says why."""


@dataclass(frozen=True)
class FenceStatus:
    """The result of checking a node: `fenced` only when every check passed."""

    fenced: bool
    message: str


class FenceAgent(Protocol):
    async def fence(self, node: str) -> str:
        """Cut `node` off; the message says what was done. Raises FenceError."""
        ...

    async def unfence(self, node: str) -> str:
        """Undo the cut (the node may come back). Raises FenceError."""
        ...

    async def status(self, node: str) -> FenceStatus:
        """Check, from scratch, whether `node` is cut off now."""
        ...


class UnsupportedAgent:
    """An agent this deployment mode cannot provide: fencing with it always fails, clearly."""

    def __init__(self, *, reason: str) -> None:
        self.reason = reason

    async def fence(self, node: str) -> str:
        raise FenceError(self.reason)

    async def unfence(self, node: str) -> str:
        return f"nothing to undo on {node}: it was never fenced by this agent"

    async def status(self, node: str) -> FenceStatus:
        return FenceStatus(fenced=False, message=self.reason)
