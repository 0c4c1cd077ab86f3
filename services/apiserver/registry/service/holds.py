"""What the apiserver's allocators that hold values in etcd share: claiming a value,
freeing it, and the repair loop.

Cluster IPs (`clusterip.py`) and node ports (`nodeports.py`) are each held by one etcd key
outside `/registry/`, created with a compare-and-swap and naming the Service (by uid) that
holds it. An apiserver that dies between holding a value and storing its Service, or
between storing a change and freeing what it dropped, leaves a key nobody holds. Like
Kubernetes' repair controllers, a loop lists the keys and the Services and deletes a key no
live Service holds once two passes in a row saw it so at the same revision (a write in
flight between the two lists is not mistaken for a leak).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging

from skiff.api.errors import ApiError, FieldError, Reason
from skiff.api.kinds import lookup, storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.storage.interface import Storage

__all__ = ["HoldRepair", "claim", "held", "invalid_service", "release", "release_held"]

log = logging.getLogger(__name__)


def invalid_service(service: Obj, errors: list[FieldError]) -> ApiError:
    """422 Invalid on the Service whose write asked for what cannot be held."""
    return ApiError.invalid("Service", str(service["metadata"].get("name", "")), errors)


async def held(storage: Storage, prefix: str) -> set[str]:
    """Every value held under `prefix` (the key's last part)."""
    kvs, _ = await storage.list(prefix)
    return {kv.key.removeprefix(prefix) for kv in kvs}


async def claim(storage: Storage, key: str, kind: str, service: Obj) -> bool:
    """Hold `key` for `service` (create it only if absent); False if another holds it."""
    meta = service["metadata"]
    try:
        await storage.create(key, {"kind": kind,
                                   "service": f"{meta.get('namespace')}/{meta.get('name')}",
                                   "uid": meta.get("uid", "")})
    except ApiError as err:
        if err.reason == Reason.ALREADY_EXISTS:
            return False
        raise
    return True


async def release(storage: Storage, key: str) -> None:
    """Free `key` as it is now (one changed meanwhile is left to the repair loop)."""
    kv, _ = await storage.get(key)
    if kv is not None:
        with contextlib.suppress(ApiError):
            await storage.delete(key, expected_revision=kv.mod_revision)


async def release_held(storage: Storage, key: str, service: Obj) -> None:
    """Delete the hold at `key` if `service` (by uid) holds it; a hold changed meanwhile is
    left to the repair loop."""
    uid = str((service.get("metadata") or {}).get("uid", ""))
    kv, _ = await storage.get(key)
    if kv is not None and kv.obj is not None and str(kv.obj.get("uid")) == uid:
        with contextlib.suppress(ApiError):
            await storage.delete(key, expected_revision=kv.mod_revision)


class HoldRepair(abc.ABC):
    """Frees the keys under `prefix` that no Service holds any more."""

    prefix: str
    what: str  # for the logs: "service IPs", "node ports"

    def __init__(self, storage: Storage, *, interval: float = 30.0) -> None:
        self.storage = storage
        self.interval = interval
        self._suspects: dict[str, int] = {}

    @abc.abstractmethod
    def in_use(self, services: list[Obj]) -> set[tuple[str, str]]:
        """The (Service uid, held value) pairs the live Services account for."""

    async def run_once(self) -> list[str]:
        """One pass; returns the values freed."""
        kvs, _ = await self.storage.list(self.prefix)
        services, _ = await self.storage.list(storage_prefix(lookup("services")))
        in_use = self.in_use([kv.obj for kv in services if kv.obj is not None])
        suspects: dict[str, int] = {}
        released: list[str] = []
        for kv in kvs:
            value = kv.key.removeprefix(self.prefix)
            if (str((kv.obj or {}).get("uid", "")), value) in in_use:
                continue
            if self._suspects.get(kv.key) == kv.mod_revision:
                with contextlib.suppress(ApiError):
                    await self.storage.delete(kv.key, expected_revision=kv.mod_revision)
                    released.append(value)
                continue
            suspects[kv.key] = kv.mod_revision
        self._suspects = suspects
        return released

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                released = await self.run_once()
            except ApiError as err:
                log.info("repair skipped", extra={"held": self.what, "error": err.message})
                continue
            if released:
                log.info("released values no Service holds",
                         extra={"held": self.what, "values": ",".join(released)})
