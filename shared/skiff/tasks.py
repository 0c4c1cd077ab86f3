"""Stopping a service's own asyncio tasks so that they really stop.

One `cancel()` is not always enough on Python 3.11: `asyncio.wait_for` (used inside aetcd
and grpcio) drops a cancellation that arrives just as the thing it awaits completes, and the
task then goes on awaiting something that never comes. A process told to stop hung there
(an apiserver SIGTERMed while its etcd watch was being created, then a replica that outlived
its parent). `cancel_tasks` cancels again until every task has finished. A TaskGroup
cancels its children only once, so loops that run under one (informers, controllers) use
`asyncio.timeout`, which keeps cancellations, instead of `asyncio.wait_for`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def cancel_tasks(*tasks: asyncio.Task[Any], every: float = 0.5) -> None:
    """Cancel `tasks` and return once every one has finished, cancelling any still running
    again every `every` seconds. Their results and exceptions are discarded."""
    pending = {t for t in tasks if not t.done()}
    rounds = 0
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every)
        rounds += 1
        if pending and rounds == 1:
            log.warning("tasks ignored a cancellation; cancelling them again",
                        extra={"tasks": ",".join(sorted(t.get_name() for t in pending))})
    for task in tasks:  # retrieved, so none is logged as "exception was never retrieved"
        if not task.cancelled():
            task.exception()
