"""The `Storage` seam: what the registry, the watch cache and admission's lookups need from
a key-value store with revisions, as Kubernetes' `storage.Interface` is for its generic
registry.

etcd (etcd.py, `EtcdStorage`) is the one the apiserver runs on; memory.py is an in-memory
store with the same answers for unit tests. Keys are strings under `/registry/`; every
write returns or carries the store's new revision, which is the object's resourceVersion.
Compaction and the etcd client's lifecycle are etcd's own and stay off this seam.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from skiff.api.types import Obj
from skiff.apiserver.storage.values import KeyValue, ListPage, RawEvent


class Storage(Protocol):
    """A revisioned key-value store (SPEC AS3–AS6): compare-and-swap writes, reads at a
    revision, a watch of changes under a prefix and the history of one key."""

    # The watch cache's newest event of a key, when a cache feeds this store's readers.
    recent: Callable[[str], RawEvent | None] | None

    async def get(self, key: str, *, revision: int = 0) -> tuple[KeyValue | None, int]:
        """The key's value (None when absent) and the revision it was read at."""
        ...

    async def list(self, prefix: str, *, revision: int = 0
                   ) -> tuple[builtins.list[KeyValue], int]:
        """Every key under `prefix` at one revision, and that revision."""
        ...

    async def list_page(self, prefix: str, *, revision: int = 0, start: bytes = b"",
                        limit: int = 0) -> ListPage:
        """Up to `limit` keys under `prefix` from key `start` on, at `revision`."""
        ...

    async def current_revision(self) -> int:
        """The store's newest revision."""
        ...

    async def quorum_revision(self, *, timeout: float) -> int:
        """The newest revision, read so that it is current (a linearizable read)."""
        ...

    async def create(self, key: str, obj: Obj, *, ttl: int = 0) -> Obj:
        """Put a new key (AlreadyExists if present); the object with its resourceVersion.
        `ttl` > 0: the store deletes the key that many seconds (or a little more) after
        this write, unless written again (Events, `--event-ttl`)."""
        ...

    async def update(self, key: str, obj: Obj, *, expected_revision: int,
                     ttl: int = 0) -> Obj:
        """Compare-and-swap on the key's revision (Conflict when it moved on); `ttl` as
        for `create`, counted from this write."""
        ...

    async def delete(self, key: str, *, expected_revision: int) -> int:
        """Delete if unchanged since `expected_revision`; the deletion's revision."""
        ...

    def watch(self, prefix: str, *, start_revision: int) -> AsyncIterator[RawEvent]:
        """Changes under `prefix` ("": every key) from `start_revision` on (Gone when
        compacted)."""
        ...

    async def history(self, key: str) -> builtins.list[KeyValue]:
        """Every version of one key the store still has, oldest first (AS6)."""
        ...
