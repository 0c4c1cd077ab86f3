"""SPEC AU10: the compactor's claim on `compact_rev_key`, against an in-memory etcd.

Each apiserver's round claims the interval with a compare-and-swap on the key's version; the
winner compacts to the revision it saw one round earlier, the others adopt the key's version
and try again next round.
"""

from __future__ import annotations

from typing import cast

import pytest

from skiff.api.errors import ApiError
from skiff.apiserver.storage.compaction import Compactor
from skiff.apiserver.storage.etcd import EtcdStorage


class FakeEtcd:
    """`compact_cas` and `compact` as etcd answers them; `head` is etcd's revision."""

    def __init__(self) -> None:
        self.head = 100
        self.version = 0  # of compact_rev_key
        self.value = 0
        self.compactions: list[int] = []
        self.compacted = 0

    async def compact_cas(self, *, expect_version: int, revision: int
                          ) -> tuple[bool, int, int, int]:
        if self.version != expect_version:
            return False, self.version, self.head, self.value
        self.head += 1  # the put is a write
        self.version, self.value = self.version + 1, revision
        return True, self.version, self.head, revision

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        if revision < self.compacted:
            raise ApiError.gone(f"revision {revision} is already compacted")
        self.compacted = revision
        self.compactions.append(revision)


def _compactor(etcd: FakeEtcd) -> Compactor:
    return Compactor(cast(EtcdStorage, etcd), interval=1.0)


async def test_au10_compacts_to_the_revision_of_one_interval_earlier() -> None:
    etcd = FakeEtcd()
    compactor = _compactor(etcd)
    assert await compactor.compact_once() == 0, "the first round only records the revision"
    seen = etcd.head
    etcd.head += 50  # an interval of writes
    assert await compactor.compact_once() == seen
    seen = etcd.head
    etcd.head += 7
    assert await compactor.compact_once() == seen
    assert etcd.compactions == [101, 152]


async def test_au10_two_apiservers_compact_once_per_interval() -> None:
    etcd = FakeEtcd()
    a, b = _compactor(etcd), _compactor(etcd)
    for _ in range(10):  # one interval: each apiserver's round, a's first
        await a.compact_once()
        await b.compact_once()
        etcd.head += 10
    assert etcd.version == 10, "one claim per interval, not one per apiserver"
    assert len(etcd.compactions) == 9
    assert etcd.compactions == sorted(etcd.compactions)


async def test_au10_the_other_apiserver_takes_over_when_the_compactor_stops() -> None:
    etcd = FakeEtcd()
    a, b = _compactor(etcd), _compactor(etcd)
    for _ in range(3):
        await a.compact_once()
        await b.compact_once()
        etcd.head += 10
    # `a` is gone: at its next round `b` claims the interval and compacts to the revision
    # it saw one interval earlier.
    seen = etcd.head - 10
    assert await b.compact_once() == seen
    assert etcd.compactions[-1] == seen


@pytest.mark.parametrize("already", [pytest.param(10_000, id="compacted-further-by-hand")])
async def test_au10_a_revision_compacted_already_is_no_error(already: int) -> None:
    etcd = FakeEtcd()
    compactor = _compactor(etcd)
    await compactor.compact_once()
    etcd.compacted = already
    assert await compactor.compact_once() == 0
