"""How an etcd call is classified and attempted: which failures are transient (retried on
the next member), which mean a raft election is under way (asked again on the same
member), and a client closed under a call by another request's failover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aetcd.exceptions
import aetcd.rpc as etcdrpc
import grpc

T = TypeVar("T")


# What etcd answers, with a code aetcd does not map, when it cannot reach a quorum in time.
_QUORUM_ERRORS = ("context deadline exceeded", "request timed out", "no leader",
                  "leader changed", "unhealthy cluster", "timed out waiting for read index")

# What a live member answers while its raft group elects a leader.
_ELECTION_ERRORS = ("leader changed", "no leader")

_TRANSIENT = (
    aetcd.exceptions.ConnectionFailedError,
    aetcd.exceptions.ConnectionTimeoutError,
    aetcd.exceptions.InternalError,
)


class EtcdOverloaded(aetcd.exceptions.ClientError):  # type: ignore[misc]
    """etcd refused a write before proposing it ("etcdserver: too many requests": more
    committed entries wait to be applied than it accepts): nothing was written, the member
    is alive, so the write is asked again there after a pause, not on another member."""


def overloaded(err: etcdrpc.AioRpcError) -> bool:
    return "too many requests" in (err.details() or "")


def fails_over(err: BaseException) -> bool:
    """A transient failure that moves the next attempt to the next member: not a client
    already replaced (`ClientClosed`), not a member that answered it is busy."""
    return transient(err) and not isinstance(err, (ClientClosed, EtcdOverloaded))


def transient(err: BaseException) -> bool:
    if isinstance(err, (*_TRANSIENT, EtcdOverloaded)):
        return True
    return isinstance(err, aetcd.exceptions.ClientError) and any(
        text in str(err) for text in _QUORUM_ERRORS)



class ClientClosed(aetcd.exceptions.ConnectionFailedError):  # type: ignore[misc]
    """The etcd client was closed under a call (another request's failover): grpc.aio
    cancels the calls of a closed channel, which the caller sees as CancelledError."""


async def call_once(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, with a CancelledError that nobody asked this task for (the channel was
    closed under the call) turned into a transient `ClientClosed`: a real cancellation
    still ends the caller, a closed client is retried on the next one."""
    try:
        return await call()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise ClientClosed("the etcd client was closed during the call") from None


async def during_election(call: Callable[[], Awaitable[T]],
                          answers: list[str] | None = None) -> T:
    """`call_once(call)`, asked again (with a short backoff, until the caller's timeout) while
    the member answers that its leader changed or that it has none yet: a member that
    answers is alive, and an election ends within etcd's election timeout. Only a member
    that stays silent or leaderless for its whole slot is left for the next one. Each such
    answer is appended to `answers`, so a caller whose timeout ends the wait can say why."""
    delay = 0.05
    while True:
        try:
            return await call_once(call)
        except etcdrpc.AioRpcError as err:
            if not any(text in (err.details() or "") for text in _ELECTION_ERRORS):
                raise
            if answers is not None:
                answers.append(err.details() or "")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.4)


def no_space(err: etcdrpc.AioRpcError) -> bool:
    """etcd refused a write because its database reached `--quota-backend-bytes`."""
    details = err.details() or ""
    if overloaded(err):  # etcd answers that one with RESOURCE_EXHAUSTED too
        return False
    return (err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            or "database space exceeded" in details or "no space" in details)
