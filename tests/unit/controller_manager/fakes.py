"""An in-memory stand-in for the API client's object verbs, with resourceVersion CAS."""

from __future__ import annotations

import copy

from skiff.api import ApiError, Reason
from skiff.api.types import Obj


class FakeApi:
    """get / create / update on leases, with Conflict on a stale resourceVersion."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.revision = 0
        self.unavailable = False

    def _check(self) -> None:
        if self.unavailable:
            raise ApiError(Reason.SERVICE_UNAVAILABLE, "apiserver unavailable")

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        self._check()
        obj = self.objects.get((resource, namespace, name))
        if obj is None:
            raise ApiError(Reason.NOT_FOUND, f'{resource} "{name}" not found')
        return copy.deepcopy(obj)

    async def create(self, obj: Obj) -> Obj:
        self._check()
        meta = obj["metadata"]
        key = ("leases", meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise ApiError(Reason.ALREADY_EXISTS, "exists")
        self.revision += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.revision)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    async def update(self, obj: Obj) -> Obj:
        self._check()
        meta = obj["metadata"]
        key = ("leases", meta.get("namespace"), meta["name"])
        current = self.objects.get(key)
        if current is None:
            raise ApiError(Reason.NOT_FOUND, "gone")
        if current["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        return await self.create_or_replace(key, obj)

    async def create_or_replace(self, key: tuple[str, str | None, str], obj: Obj) -> Obj:
        self.revision += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.revision)
        self.objects[key] = stored
        return copy.deepcopy(stored)
