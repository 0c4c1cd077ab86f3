"""SPEC CP4: a fenced write takes the leader's Lease from the watch cache instead
of reading it from etcd first, and a cache that lags (or is wrong) never lets a deposed
leader write nor refuses the current one: real etcd, the apiserver's own storage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.apiserver.storage.fencing import leader_epoch
from skiff.apiserver.storage.values import RawEvent
from skiff.cluster.processes import Process, etcd_process, free_port, wait_etcd_healthy
from skiff.rpc.epoch import LeaderEpoch

LEASE_KEY = "/registry/leases/kube-system/cached-lease-test"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc: Process = etcd_process(tmp_path, client_port=port, peer_port=free_port())
    proc.start()
    try:
        wait_etcd_healthy(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stop()


@pytest.fixture
async def storage(etcd: str) -> AsyncIterator[EtcdStorage]:
    store = EtcdStorage(etcd, request_timeout=5, retry_seconds=5)
    await store.connect()
    try:
        yield store
    finally:
        await store.close()


def _lease(holder: str, transitions: int) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "cached-lease-test", "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseTransitions": transitions,
                     "leaseDurationSeconds": 15}}


def _cached(obj: dict[str, Any], revision: int) -> RawEvent:
    return RawEvent(revision, LEASE_KEY, "PUT", obj, None, False)


def _epoch(holder: str, transitions: int) -> LeaderEpoch:
    return LeaderEpoch("kube-system", "cached-lease-test", holder, transitions)


async def _write_as(storage: EtcdStorage, epoch: LeaderEpoch, key: str) -> None:
    token = leader_epoch.set(epoch)
    try:
        await storage.create(key, {"metadata": {"name": key.rsplit("/", 1)[1]}})
    finally:
        leader_epoch.reset(token)


async def _cache_missed_a_write(storage: EtcdStorage, holder: str, transitions: int) -> None:
    """The Lease is leader-a's (term 0) and then becomes `holder`'s (term `transitions`) in
    etcd, while the watch cache still shows leader-a's version."""
    first = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    cached_revision = int(first["metadata"]["resourceVersion"])
    await storage.update(LEASE_KEY, _lease(holder, transitions),
                         expected_revision=cached_revision)
    storage.recent = lambda key: _cached(_lease("leader-a", 0), cached_revision)


async def _written(storage: EtcdStorage, key: str) -> bool:
    got, _ = await storage.get(key)
    return got is not None


async def test_cp4_cached_lease_of_a_deposed_term_does_not_let_its_leader_write(
        storage: EtcdStorage) -> None:
    await _cache_missed_a_write(storage, "leader-b", 1)  # leader-b took over
    with pytest.raises(ApiError) as refused:
        await _write_as(storage, _epoch("leader-a", 0), "/registry/pods/ns/by-a")
    assert refused.value.reason == Reason.CONFLICT
    assert "leader-b" in refused.value.message
    assert not await _written(storage, "/registry/pods/ns/by-a")


async def test_cp4_cache_that_lags_a_new_term_does_not_refuse_its_leader(
        storage: EtcdStorage) -> None:
    await _cache_missed_a_write(storage, "leader-b", 1)
    await _write_as(storage, _epoch("leader-b", 1), "/registry/pods/ns/by-b")
    assert await _written(storage, "/registry/pods/ns/by-b")


async def test_cp4_cached_lease_renewed_since_is_checked_again(
        storage: EtcdStorage) -> None:
    await _cache_missed_a_write(storage, "leader-a", 0)  # a renewal: same holder and term
    await _write_as(storage, _epoch("leader-a", 0), "/registry/pods/ns/renewed")
    assert await _written(storage, "/registry/pods/ns/renewed")


async def test_cp4_current_cached_lease_needs_no_etcd_read(
        storage: EtcdStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    created = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    revision = int(created["metadata"]["resourceVersion"])
    storage.recent = lambda key: _cached(_lease("leader-a", 0), revision)
    reads: list[str] = []
    real_get = storage.get

    async def counting_get(key: str, *, revision: int = 0) -> Any:
        reads.append(key)
        return await real_get(key, revision=revision)

    with monkeypatch.context() as patched:
        patched.setattr(storage, "get", counting_get)
        await _write_as(storage, _epoch("leader-a", 0), "/registry/pods/ns/cached")
    assert reads == []
    assert await _written(storage, "/registry/pods/ns/cached")
