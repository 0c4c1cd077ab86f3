"""Defect seen in the 10,000-hollow-node run (issue 37): etcd answered writes with
"etcdserver: too many requests" (its apply backlog is full; the write was refused before it
was proposed) and the apiserver answered InternalError. The write is asked again on the
same member after a pause; if etcd stays overloaded, the answer is TooManyRequests (429)
with a retry-after, never an InternalError, and nothing is written twice."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aetcd
import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from skiff.api.errors import ApiError, Reason
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.apiserver.storage.retry import no_space

OVERLOADED = "etcdserver: too many requests"


def _rpc_error(code: grpc.StatusCode, details: str) -> AioRpcError:
    return AioRpcError(code, Metadata(), Metadata(), details=details)


class BusyMember(aetcd.Client):  # type: ignore[misc]
    """An etcd member whose first `refusals` transactions are refused as overloaded."""

    def __init__(self, refusals: int, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(host="127.0.0.1", port=2379)
        self.refusals, self.code, self.calls, self.written = refusals, code, 0, 0
        self.kvstub = self

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def Txn(self, request: Any, timeout: float) -> Any:  # noqa: N802 (etcd's name)
        self.calls += 1
        if self.calls <= self.refusals:
            raise _rpc_error(self.code, OVERLOADED)
        self.written += 1
        return SimpleNamespace(succeeded=True, header=SimpleNamespace(revision=7))


def _storage(member: BusyMember, retry_seconds: float = 5.0) -> tuple[EtcdStorage, list[int]]:
    storage = EtcdStorage("http://127.0.0.1:2379", retry_seconds=retry_seconds)
    storage._client = member
    failovers: list[int] = []

    def new_client() -> aetcd.Client:
        failovers.append(1)
        return member
    storage._new_client = new_client  # type: ignore[method-assign]
    return storage, failovers


@pytest.mark.parametrize("code", [grpc.StatusCode.UNKNOWN, grpc.StatusCode.RESOURCE_EXHAUSTED])
async def test_au10_a_write_etcd_refuses_as_overloaded_is_asked_again_on_the_same_member(
        code: grpc.StatusCode) -> None:
    member = BusyMember(refusals=3, code=code)
    storage, failovers = _storage(member)
    stored = await storage.create("/registry/configmaps/default/a", {"metadata": {"name": "a"}})
    assert stored["metadata"]["resourceVersion"] == "7"
    assert (member.calls, member.written, failovers) == (4, 1, [])


async def test_au10_etcd_staying_overloaded_is_too_many_requests_not_an_internal_error() -> None:
    storage, _ = _storage(BusyMember(refusals=10_000), retry_seconds=0.3)
    with pytest.raises(ApiError) as caught:
        await storage.create("/registry/configmaps/default/a", {"metadata": {"name": "a"}})
    assert caught.value.reason == Reason.TOO_MANY_REQUESTS
    assert caught.value.retry_after_seconds == 1
    assert "too many requests" in caught.value.message


def test_au10_overload_is_not_mistaken_for_a_full_database() -> None:
    assert not no_space(_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, OVERLOADED))
    assert no_space(_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               "etcdserver: mvcc: database space exceeded"))
