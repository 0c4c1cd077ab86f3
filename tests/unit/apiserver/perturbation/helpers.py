"""A registry on the in-memory store with its watch cache and perturbation table running,
for the perturbation unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache


def pert(name: str = "p", **spec: Any) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
            "spec": spec}


def cm(name: str, value: str = "0") -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": value}}


@asynccontextmanager
async def running_registry() -> AsyncIterator[Registry]:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        yield registry
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def applied(registry: Registry, name: str, *, present: bool = True) -> None:
    """Wait until the table follows the create (or delete) of Perturbation `name`."""
    async with asyncio.timeout(3):
        while (name in registry.perturbations._rules) != present:
            await asyncio.sleep(0.01)
