"""A write whose outcome the apiserver cannot know is
answered as one, as kube-apiserver answers it: 504 Timeout "the server was unable to return
a response in the time allotted, but may still be processing the request", never a Conflict
or AlreadyExists for a write that happened.

Real etcd behind a loopback TCP proxy (`Blackhole.drop_answers`) that lets a transaction
through but swallows etcd's answer and then breaks the connection (a network failure after
the commit): the apiserver's etcd client sees UNAVAILABLE, retries the transaction, and its
compare fails on the very write the first attempt committed. Before the fix the client was
told AlreadyExists (create) or Conflict (update, delete).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.api.errors import HTTP_CODES
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.cluster.processes import Process, etcd_process, free_port, wait_etcd_healthy
from tests.integration.blackhole import Blackhole

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

KEY = "/registry/configmaps/default/ambiguous"
MESSAGE = ("the server was unable to return a response in the time allotted, but may still "
           "be processing the request")


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    proc: Process = etcd_process(tmp_path, client_port=port, peer_port=free_port())
    proc.start()
    try:
        wait_etcd_healthy(proc, port)
        yield port
    finally:
        proc.stop()


@pytest.fixture
async def proxied(etcd: int) -> AsyncIterator[tuple[EtcdStorage, Blackhole, EtcdStorage]]:
    """(storage through the proxy, the proxy, storage straight to etcd)."""
    async with Blackhole(etcd) as proxy:
        through = EtcdStorage(f"http://127.0.0.1:{proxy.port}", request_timeout=3,
                              retry_seconds=10)
        direct = EtcdStorage(f"http://127.0.0.1:{etcd}", request_timeout=3, retry_seconds=3)
        await through.connect()
        await through.current_revision()  # the connection the breaks apply to is open
        await direct.connect()
        try:
            yield through, proxy, direct
        finally:
            await through.close()
            await direct.close()


def _cm(value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ambiguous", "namespace": "default"},
            "data": {"v": value}}


def _assert_timeout(err: ApiError) -> None:
    assert err.reason == Reason.TIMEOUT, (err.reason, err.message)
    assert HTTP_CODES[err.reason] == 504
    assert err.message == MESSAGE


async def test_defect13_a_write_whose_commit_is_unknown_after_unavailable_is_a_timeout(
        proxied: tuple[EtcdStorage, Blackhole, EtcdStorage]) -> None:
    storage, proxy, direct = proxied

    # create: committed, answer lost, retried -> not AlreadyExists
    proxy.drop_answers()
    with pytest.raises(ApiError) as created:
        await storage.create(KEY, _cm("1"))
    _assert_timeout(created.value)
    stored, _ = await direct.get(KEY)
    assert stored is not None and stored.obj is not None
    assert stored.obj["data"] == {"v": "1"}, "the write the client was told timed out happened"

    # update: committed, answer lost, retried -> not Conflict
    proxy.drop_answers()
    with pytest.raises(ApiError) as updated:
        await storage.update(KEY, _cm("2"), expected_revision=stored.mod_revision)
    _assert_timeout(updated.value)
    stored, _ = await direct.get(KEY)
    assert stored is not None and stored.obj is not None and stored.obj["data"] == {"v": "2"}

    # delete: committed, answer lost, retried -> not Conflict
    proxy.drop_answers()
    with pytest.raises(ApiError) as deleted:
        await storage.delete(KEY, expected_revision=stored.mod_revision)
    _assert_timeout(deleted.value)
    assert (await direct.get(KEY))[0] is None

    # A plain conflict, with every answer arriving, is still a conflict.
    await storage.create(KEY, _cm("3"))
    with pytest.raises(ApiError) as exists:
        await storage.create(KEY, _cm("4"))
    assert exists.value.reason == Reason.ALREADY_EXISTS
    with pytest.raises(ApiError) as conflict:
        await storage.update(KEY, _cm("5"), expected_revision=1)
    assert conflict.value.reason == Reason.CONFLICT
