"""Waiting helpers shared by the integration tests: poll until something holds, or read an
object that may not exist. Real processes act asynchronously; tests wait, never sleep-and-hope.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient


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


async def events(api: ApiClient, namespace: str, *, reason: str | None = None,
                 name: str | None = None) -> list[Obj]:
    """The Events of `namespace` now, filtered by reason and involved object's name."""
    items: list[Obj] = (await api.list("events", namespace))["items"]
    return [e for e in items if (reason is None or e.get("reason") == reason)
            and (name is None or (e.get("involvedObject") or {}).get("name") == name)]


async def recorded(api: ApiClient, namespace: str, *, reason: str, name: str | None = None,
                   timeout: float = 15) -> list[Obj]:
    """The Events with `reason` once at least one exists: components record an Event just
    after the change a test observes, so asserting on it at once would race."""
    found: list[Obj] = await wait_for(
        lambda: events(api, namespace, reason=reason, name=name), timeout=timeout,
        what=f"a {reason} Event" + (f" for {name}" if name else ""))
    return found


def until(predicate: Callable[[], Any], what: str, timeout: float = 60.0,
          interval: float = 0.2) -> Any:
    """Poll a synchronous `predicate` (kubectl, the official client) until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def freeze(process: Any, *, timeout: float = 5.0) -> None:
    """SIGSTOP `process` (a skiff.cluster.processes.Process) and return once every thread of it
    has stopped. A stop takes effect as each thread next enters the kernel, and until then a
    thread running on another core can still answer — an etcd follower acking one more
    write after the test cut it off (a full run saw a minority apiserver's write succeed)."""
    process.signal(signal.SIGSTOP)
    tasks = Path(f"/proc/{process.pid}/task")
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in tasks.glob("*/stat"):
            try:
                states.append(task.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue  # a thread that just exited
        if states and all(state in ("T", "t") for state in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.name} did not stop within {timeout:g}s: {states}")
        time.sleep(0.005)
