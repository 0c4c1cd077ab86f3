"""SPEC AU10 (etcd stays bounded): kube-apiserver's `--event-ttl` leases, the pure logic (a
fake clock). One lease is shared by writes whose expiry falls in its reuse window (the
smaller of 60 s and 5 % of the TTL), each is granted for the TTL plus that window, and one
etcd no longer has is never reused."""

from __future__ import annotations

from skiff.apiserver.storage.leases import LeaseReuse


class _Etcd:
    def __init__(self) -> None:
        self.granted: list[int] = []  # the TTL of each lease asked for

    async def grant(self, ttl: int) -> int:
        self.granted.append(ttl)
        return len(self.granted)  # lease ids 1, 2, ...


async def test_au10_event_ttl_writes_within_the_reuse_window_share_one_lease() -> None:
    etcd, now = _Etcd(), [1000.0]
    leases = LeaseReuse(etcd.grant, clock=lambda: now[0])
    assert await leases.lease(3600) == 1
    assert etcd.granted == [3600 + 60]  # 5 % of an hour is 180 s: the 60 s cap applies
    now[0] += 59.5
    assert await leases.lease(3600) == 1  # still has at least the TTL left
    now[0] += 1.0
    assert await leases.lease(3600) == 2  # would expire before the TTL: a new one
    assert etcd.granted == [3660, 3660]


async def test_au10_event_ttl_a_short_ttl_gets_a_window_of_five_percent() -> None:
    etcd, now = _Etcd(), [0.0]
    leases = LeaseReuse(etcd.grant, clock=lambda: now[0])
    await leases.lease(100)
    assert etcd.granted == [105]
    now[0] += 4.0
    assert await leases.lease(100) == 1
    await leases.lease(2)  # a window of 0: every write its own lease
    await leases.lease(2)
    assert etcd.granted == [105, 2, 2]


async def test_au10_event_ttl_a_lease_etcd_lost_is_not_reused() -> None:
    etcd = _Etcd()
    leases = LeaseReuse(etcd.grant, clock=lambda: 0.0)
    first = await leases.lease(3600)
    leases.forget(first)
    assert await leases.lease(3600) != first
    leases.forget(first)  # an old id: the current lease stays
    assert await leases.lease(3600) == 2
