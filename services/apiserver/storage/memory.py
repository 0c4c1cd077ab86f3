"""An in-memory `Storage` for unit tests: the registry, the watch cache and admission's
lookups run on it as on etcd, without an etcd.

It keeps every version of every key (a log of revisions, as etcd's MVCC does), so reads at
a past revision, history and watches from a revision answer as etcd.py's do; `compact`
drops the log before a revision, after which those reads are Gone. Values are encoded and
decoded on every write and read, so callers never share an object with the store.
Used by tests under tests/unit/apiserver (it lives in the package, beside the Protocol it
implements, so mypy keeps the two in step and every room's tests can use it).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.storage.values import (
    EXPIRED_GET,
    EXPIRED_LIST,
    EXPIRED_WATCH,
    KeyValue,
    ListPage,
    RawEvent,
    decode_value,
    encode_value,
)


@dataclass(frozen=True)
class _Version:
    revision: int
    key: str
    value: bytes | None  # None: the key was deleted at this revision
    create_revision: int


class MemoryStorage:
    """A `Storage` held in a list of versions, one per revision."""

    def __init__(self) -> None:
        self.recent: Callable[[str], RawEvent | None] | None = None
        self._log: list[_Version] = []
        self._compacted = 0  # reads below this revision are Gone
        self._changed = asyncio.Condition()

    @property
    def revision(self) -> int:
        return self._log[-1].revision if self._log else 1

    def _latest(self, key: str, revision: int = 0) -> _Version | None:
        for v in reversed(self._log):
            if v.key == key and (not revision or v.revision <= revision):
                return v
        return None

    def _check(self, revision: int, expired: str) -> int:
        if revision and revision < self._compacted:
            raise ApiError.gone(expired)
        if revision > self.revision:
            raise ApiError.bad_request(f"revision {revision} is newer than the store's")
        return revision or self.revision

    def _keys(self, prefix: str, revision: int) -> builtins.list[KeyValue]:
        keys = sorted({v.key for v in self._log if v.key.startswith(prefix)})
        out = []
        for key in keys:
            kv = self._kv(self._latest(key, revision))
            if kv is not None:
                out.append(kv)
        return out

    @staticmethod
    def _kv(v: _Version | None) -> KeyValue | None:
        if v is None or v.value is None:
            return None
        return KeyValue(v.key, decode_value(v.value, v.revision), v.revision,
                        v.create_revision)

    async def get(self, key: str, *, revision: int = 0) -> tuple[KeyValue | None, int]:
        at = self._check(revision, EXPIRED_GET)
        return self._kv(self._latest(key, at)), self.revision

    async def list(self, prefix: str, *, revision: int = 0
                   ) -> tuple[builtins.list[KeyValue], int]:
        at = self._check(revision, EXPIRED_LIST)
        return self._keys(prefix, at), at

    async def list_page(self, prefix: str, *, revision: int = 0, start: bytes = b"",
                        limit: int = 0) -> ListPage:
        at = self._check(revision, EXPIRED_LIST)
        items = [kv for kv in self._keys(prefix, at) if kv.key.encode() >= start]
        page = items[:limit] if limit else items
        more = len(page) < len(items)
        next_key = page[-1].key.encode() + b"\x00" if more and page else b""
        return ListPage(page, at, more, next_key, len(items) - len(page))

    async def current_revision(self) -> int:
        return self.revision

    async def quorum_revision(self, *, timeout: float) -> int:
        return self.revision

    async def _write(self, key: str, value: bytes | None, create_revision: int) -> int:
        revision = self.revision + 1
        self._log.append(_Version(revision, key, value, create_revision or revision))
        async with self._changed:
            self._changed.notify_all()
        return revision

    # `ttl` is etcd's to honour (leases): this store for unit tests keeps every object.
    async def create(self, key: str, obj: Obj, *, ttl: int = 0) -> Obj:
        cur = self._latest(key)
        if cur is not None and cur.value is not None:
            raise ApiError(Reason.ALREADY_EXISTS, "already exists")
        value = encode_value(obj)
        revision = await self._write(key, value, 0)
        return decode_value(value, revision)

    async def update(self, key: str, obj: Obj, *, expected_revision: int,
                     ttl: int = 0) -> Obj:
        cur = self._latest(key)
        if cur is None or cur.value is None or cur.revision != expected_revision:
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        value = encode_value(obj)
        revision = await self._write(key, value, cur.create_revision)
        return decode_value(value, revision)

    async def delete(self, key: str, *, expected_revision: int) -> int:
        cur = self._latest(key)
        if cur is None or cur.value is None or cur.revision != expected_revision:
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        return await self._write(key, None, 0)

    async def compact(self, revision: int) -> None:
        """Forget the log before `revision` (keeping each key's version at it)."""
        self._compacted = max(self._compacted, revision)

    def _event(self, v: _Version) -> RawEvent:
        prev = self._latest(v.key, v.revision - 1)
        prev_value = prev.value if prev is not None else None
        return RawEvent(v.revision, v.key, "PUT" if v.value is not None else "DELETE",
                        None, None, created=v.value is not None and v.create_revision == v.revision,
                        value=v.value, prev_value=prev_value,
                        prev_revision=prev.revision if prev is not None else 0)

    async def watch(self, prefix: str, *, start_revision: int) -> AsyncIterator[RawEvent]:
        if start_revision and start_revision < self._compacted:
            raise ApiError.gone(EXPIRED_WATCH)
        sent = max(start_revision, 1) - 1
        while True:
            for v in self._log:
                if v.revision > sent and v.key.startswith(prefix):
                    yield self._event(v)
            sent = self.revision
            async with self._changed:
                while self.revision <= sent:
                    await self._changed.wait()

    async def history(self, key: str) -> builtins.list[KeyValue]:
        out = []
        for v in self._log:
            if v.key != key or v.revision < self._compacted:
                continue
            if v.value is None:
                out.append(KeyValue(key, None, v.revision, v.create_revision))
            else:
                kv = self._kv(v)
                assert kv is not None
                out.append(kv)
        return out
