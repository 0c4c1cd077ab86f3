"""Epoch fencing: destructive writes carry the leader's epoch; the apiserver refuses a
deposed leader's and accepts the current leader's, atomically with the write."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.api.testing import make_node, make_pod
from skiff.client import ApiClient
from skiff.client.leaderelection import LeaderElectionConfig, LeaderElector
from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import get_or_none, wait_for


def _elector(client: ApiClient, identity: str) -> LeaderElector:
    return LeaderElector(client=client, config=LeaderElectionConfig(
        namespace="kube-system", name="fencing-test", identity=identity,
        lease_duration=2, renew_deadline=1.5, retry_period=0.5))


async def _pod(api: ApiClient, name: str) -> None:
    builder = make_pod(name)
    builder.container("main", image="busybox")
    await api.create(builder.obj())


async def test_issue11_stale_leader_epoch_is_refused_current_one_accepted(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    target = ha_cluster.targets
    async with ApiClient(target) as admin, ApiClient(target) as old, \
            ApiClient(target) as new:
        builder = make_node("n1").capacity({"cpu": "8", "memory": "16Gi", "pods": "110"})
        await admin.create(builder.obj())
        for name in ("bound-by-old", "deleted-by-old", "deleted-by-new"):
            await _pod(admin, name)
        old_leader, new_leader = _elector(old, "leader-a"), _elector(new, "leader-b")

        assert await old_leader.try_acquire_or_renew()
        await old.bind("default", "bound-by-old", "n1")  # the current leader: accepted

        # leader-a stops renewing (frozen); leader-b takes the lease once it expires.
        await wait_for(new_leader.try_acquire_or_renew, timeout=20,
                       what="leader-b to take the lease")
        assert new.leader_epoch is not None and new.leader_epoch.transitions == 1

        # leader-a wakes up still believing it leads: its destructive writes are refused.
        with pytest.raises(ApiError) as refused:
            await old.delete("pods", "deleted-by-old", "default", grace_period_seconds=0)
        assert refused.value.reason == Reason.CONFLICT
        assert "kube-system/fencing-test" in refused.value.message
        assert "leader-b" in refused.value.message
        assert await get_or_none(admin, "pods", "deleted-by-old", "default") is not None
        with pytest.raises(ApiError) as refused_bind:
            await old.bind("default", "deleted-by-new", "n1")
        assert refused_bind.value.reason == Reason.CONFLICT

        # The current leader's writes go through, also after it renews.
        assert await new_leader.try_acquire_or_renew()
        await new.delete("pods", "deleted-by-new", "default", grace_period_seconds=0)
        assert await get_or_none(admin, "pods", "deleted-by-new", "default") is None
        # Writes without an epoch (users, kubelets) are not fenced.
        await admin.delete("pods", "deleted-by-old", "default", grace_period_seconds=0)
