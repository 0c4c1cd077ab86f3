"""Issue 15 / SPEC CP4: a fenced write takes the leader's Lease from the watch cache instead
of reading it from etcd first, and a cache that lags (or is wrong) never lets a deposed
leader write nor refuses the current one: real etcd, the apiserver's own storage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.apiserver.storage import EtcdStorage, RawEvent, leader_epoch
from skiff.cli.processes import Process, etcd_process, free_port, wait_etcd_healthy
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


async def _write_as(storage: EtcdStorage, epoch: LeaderEpoch, key: str) -> None:
    token = leader_epoch.set(epoch)
    try:
        await storage.create(key, {"metadata": {"name": key.rsplit("/", 1)[1]}})
    finally:
        leader_epoch.reset(token)


async def test_cp4_cached_lease_of_a_deposed_term_does_not_let_its_leader_write(
        storage: EtcdStorage) -> None:
    first = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    old_revision = int(first["metadata"]["resourceVersion"])
    # leader-b takes over; the watch cache has not seen it yet and still shows leader-a.
    await storage.update(LEASE_KEY, _lease("leader-b", 1), expected_revision=old_revision)
    storage.recent = lambda key: _cached(_lease("leader-a", 0), old_revision)

    with pytest.raises(ApiError) as refused:
        await _write_as(storage, LeaderEpoch("kube-system", "cached-lease-test",
                                             "leader-a", 0), "/registry/pods/ns/by-a")
    assert refused.value.reason == Reason.CONFLICT
    assert "leader-b" in refused.value.message
    got, _ = await storage.get("/registry/pods/ns/by-a")
    assert got is None


async def test_cp4_cache_that_lags_a_new_term_does_not_refuse_its_leader(
        storage: EtcdStorage) -> None:
    first = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    old_revision = int(first["metadata"]["resourceVersion"])
    await storage.update(LEASE_KEY, _lease("leader-b", 1), expected_revision=old_revision)
    storage.recent = lambda key: _cached(_lease("leader-a", 0), old_revision)

    await _write_as(storage, LeaderEpoch("kube-system", "cached-lease-test", "leader-b", 1),
                    "/registry/pods/ns/by-b")
    got, _ = await storage.get("/registry/pods/ns/by-b")
    assert got is not None


async def test_cp4_cached_lease_renewed_since_is_checked_again(
        storage: EtcdStorage) -> None:
    first = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    cached_revision = int(first["metadata"]["resourceVersion"])
    # A renewal the cache has not seen: same holder and term, newer mod_revision.
    await storage.update(LEASE_KEY, _lease("leader-a", 0), expected_revision=cached_revision)
    storage.recent = lambda key: _cached(_lease("leader-a", 0), cached_revision)

    await _write_as(storage, LeaderEpoch("kube-system", "cached-lease-test", "leader-a", 0),
                    "/registry/pods/ns/renewed")
    got, _ = await storage.get("/registry/pods/ns/renewed")
    assert got is not None


async def test_cp4_current_cached_lease_needs_no_etcd_read(storage: EtcdStorage) -> None:
    created = await storage.create(LEASE_KEY, _lease("leader-a", 0))
    revision = int(created["metadata"]["resourceVersion"])
    storage.recent = lambda key: _cached(_lease("leader-a", 0), revision)
    reads: list[str] = []
    real_get = storage.get

    async def counting_get(key: str, *, revision: int = 0) -> Any:
        reads.append(key)
        return await real_get(key, revision=revision)

    storage.get = counting_get  # type: ignore[method-assign]
    await _write_as(storage, LeaderEpoch("kube-system", "cached-lease-test", "leader-a", 0),
                    "/registry/pods/ns/cached")
    assert reads == []
    storage.get = real_get  # type: ignore[method-assign]
    got, _ = await storage.get("/registry/pods/ns/cached")
    assert got is not None
