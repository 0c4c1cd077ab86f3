"""Waiting helpers shared by the integration tests: poll until something holds, or read an
object that may not exist. Real processes act asynchronously; tests wait, never sleep-and-hope.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from skiff.api import ApiError, Reason
from skiff.client import ApiClient

Obj = dict[str, Any]


async def wait_for(check: Callable[[], Awaitable[Any]], *, timeout: float = 20.0,
                   what: str = "condition", interval: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy (returned); fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(interval)


async def get_or_none(api: ApiClient, resource: str, name: str,
                      namespace: str | None = None) -> Obj | None:
    """The object, or None when it is gone (NotFound)."""
    try:
        return await api.get(resource, name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise
