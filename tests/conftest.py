"""Shared test setup: fail any test that leaves asyncio tasks running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before
              if not t.done() and t is not asyncio.current_task()
              and not t.get_name().startswith("grpc")]
    for t in leaked:
        t.cancel()
    assert not leaked, f"test left tasks running: {[t.get_name() for t in leaked]}"
