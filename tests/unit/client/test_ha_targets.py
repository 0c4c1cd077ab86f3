"""The comma-separated apiserver list and the leader epoch's wire form."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.client.api import parse_targets
from skiff.client.fake import FakeClient
from skiff.client.leaderelection import LeaderElectionConfig, LeaderElector
from skiff.clock import FakeClock
from skiff.rpc.epoch import LeaderEpoch


def test_target_list_accepts_commas_spaces_and_schemes() -> None:
    assert parse_targets("grpc://127.0.0.1:1, 127.0.0.1:2,") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert parse_targets("127.0.0.1:6443") == ["127.0.0.1:6443"]


def test_empty_target_list_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no apiserver address"):
        parse_targets(" , ")


def test_leader_epoch_round_trips_a_holder_with_slashes() -> None:
    epoch = LeaderEpoch("kube-system", "kube-scheduler", "host/a_12", 7)
    assert LeaderEpoch.decode(epoch.encode()) == epoch


@pytest.mark.parametrize("bad", ["", "a/b/c", "a/b/x/holder", "/b/1/h"])
def test_malformed_leader_epoch_is_a_bad_request_naming_the_header(bad: str) -> None:
    with pytest.raises(ApiError) as err:
        LeaderEpoch.decode(bad)
    assert err.value.reason == Reason.BAD_REQUEST
    assert "skiff-leader-epoch" in err.value.message


async def test_each_term_sets_the_clients_epoch_and_a_lost_term_keeps_it() -> None:
    """The epoch names the Lease, the holder and its leaseTransitions; a deposed leader's
    client keeps its stale epoch (so its late writes are refused), never none."""
    api_a, clock = FakeClient(), FakeClock()
    api_b = FakeClient(store=api_a.store)  # one apiserver state, two clients

    def elector(api: FakeClient, identity: str) -> LeaderElector:
        config = LeaderElectionConfig(namespace="kube-system", name="kube-scheduler",
                                      identity=identity)
        return LeaderElector(client=api, clock=clock, config=config)

    a, b = elector(api_a, "a"), elector(api_b, "b")
    assert await a.try_acquire_or_renew()
    assert _epoch(api_a) == LeaderEpoch("kube-system", "kube-scheduler", "a", 0)
    assert not await b.try_acquire_or_renew()
    assert _epoch(api_b) is None
    clock.advance(15.1)
    assert await b.try_acquire_or_renew()
    assert _epoch(api_b) == LeaderEpoch("kube-system", "kube-scheduler", "b", 1)
    assert not await a.try_acquire_or_renew()
    assert _epoch(api_a) == LeaderEpoch("kube-system", "kube-scheduler", "a", 0)


def _epoch(api: FakeClient) -> LeaderEpoch | None:
    return api.leader_epoch
