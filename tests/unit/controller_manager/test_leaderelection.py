"""Leader election on a Lease (client-go semantics), on a fake clock and the in-memory API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.client.fake import FakeClient, fail_with
from skiff.clock import FakeClock
from skiff.controller_manager.leaderelection import (
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    held_by_other,
)


@pytest.mark.parametrize(("holder", "observed_at", "now", "expected"), [
    pytest.param("", 0, 1, False, id="nobody-holds"),
    pytest.param("me", 0, 1, False, id="we-hold"),
    pytest.param("other", 0, 14.9, True, id="other-within-lease"),
    pytest.param("other", 0, 15.0, False, id="other-expired"),
    pytest.param("other", 10, 20, True, id="counts-from-observed-change"),
])
def test_held_by_other(holder: str, observed_at: float, now: float, expected: bool) -> None:
    record = LeaderElectionRecord(holder_identity=holder, lease_duration_seconds=15)
    assert held_by_other(record, identity="me", observed_at=observed_at, now=now) is expected


def _elector(api: FakeClient, clock: FakeClock, identity: str) -> LeaderElector:
    config = LeaderElectionConfig(namespace="kube-system", name="cm", identity=identity)
    return LeaderElector(client=api, config=config, clock=clock)


def _lease(api: FakeClient) -> Any:
    lease = api.stored("leases", "cm", "kube-system")
    assert lease is not None
    return lease


def _holder(api: FakeClient) -> Any:
    return _lease(api)["spec"]["holderIdentity"]


async def test_only_one_candidate_wins_and_the_other_takes_over_after_the_lease() -> None:
    api, clock = FakeClient(), FakeClock()
    a, b = _elector(api, clock, "a"), _elector(api, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(10)
    assert await a.try_acquire_or_renew()  # a renews: b sees the record change
    clock.advance(2)
    assert not await b.try_acquire_or_renew()
    clock.advance(14.9)  # 14.9 s since b saw the last change
    assert not await b.try_acquire_or_renew()
    clock.advance(0.2)
    assert await b.try_acquire_or_renew()
    spec = _lease(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert not await a.try_acquire_or_renew()  # a is not the holder any more


async def test_release_lets_the_standby_take_over_at_once() -> None:
    api, clock = FakeClient(), FakeClock()
    a, b = _elector(api, clock, "a"), _elector(api, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert await b.try_acquire_or_renew()
    assert _holder(api) == "b"


def test_config_rejects_inconsistent_periods() -> None:
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        LeaderElectionConfig(namespace="n", name="l", identity="i", lease_duration=5,
                             renew_deadline=10)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_leading_stops_when_the_lease_cannot_be_renewed() -> None:
    api, clock = FakeClient(), FakeClock()
    elector = _elector(api, clock, "a")
    stop = asyncio.Event()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def lead() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    runner = asyncio.create_task(elector.run(lead=lead, stop=stop))
    await _settle()
    assert started.is_set() and elector.is_leader
    for _ in range(3):  # renewals every 2 s keep it leading
        clock.advance(2)
        await _settle()
    assert not cancelled.is_set()
    # the apiserver goes away: the last renewal was at 6 s; the renew deadline is 10 s
    api.prepend_reactor("*", "*", fail_with(ApiError(Reason.SERVICE_UNAVAILABLE,
                                                      "apiserver unavailable")))
    for _ in range(4):
        clock.advance(2)
        await _settle()
    assert not cancelled.is_set()
    for _ in range(2):
        clock.advance(2)
        await _settle()
    assert cancelled.is_set() and not elector.is_leader
    stop.set()
    await asyncio.wait_for(runner, 1)


async def test_stop_releases_the_lease() -> None:
    api, clock = FakeClient(), FakeClock()
    elector = _elector(api, clock, "a")
    stop = asyncio.Event()

    async def lead() -> None:
        await asyncio.Event().wait()

    runner = asyncio.create_task(elector.run(lead=lead, stop=stop))
    await _settle()
    assert _holder(api) == "a"
    stop.set()
    await asyncio.wait_for(runner, 1)
    assert _holder(api) == ""
