"""Shared test setup: mark the integration tests, and fail any test that leaves asyncio
tasks running."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration needs real etcd and real processes:
    `pytest -m "not integration"` is the fast unit run."""
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """pytest-randomly shuffles the order; say the seed even under -q, so a failure that
    depends on the order can be replayed."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(f"test order: replay with --randomly-seed={seed}")


def _grpc_internal(task: asyncio.Task[object]) -> bool:
    """grpc.aio's own unnamed tasks (a call's status handling) finish after the call is
    cancelled, on the library's schedule; every task the project starts has a name, so
    only these are let off: by where their code lives, not by their default name."""
    running = re.search(r"coro=<([^>]*)>", repr(task))  # "... running at <file>"
    return task.get_name().startswith("grpc") or bool(running and "grpc" in running[1])


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before
              if not t.done() and t is not asyncio.current_task() and not _grpc_internal(t)]
    for t in leaked:
        t.cancel()
    assert not leaked, f"test left tasks running: {[t.get_name() for t in leaked]}"
