"""Two schedulers elect a leader on the Lease kube-system/kube-scheduler; the
standby takes over from a frozen leader, and no pod is bound twice or lost."""

from __future__ import annotations

import signal

from skiff.api.testing import make_node, make_pod
from skiff.client import ApiClient
from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import get_or_none, wait_for

# Compressed Kubernetes timings (15 s / 10 s / 2 s by default).
ELECTION = ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
            "--leader-elect-retry-period", "0.5", "--pod-initial-backoff-seconds", "0.2",
            "--pod-max-backoff-seconds", "1"]


async def _holder(api: ApiClient) -> str:
    lease = await get_or_none(api, "leases", "kube-scheduler", "kube-system")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def _create_pods(api: ApiClient, names: list[str]) -> None:
    for name in names:
        builder = make_pod(name)
        builder.container("main", image="busybox")
        await api.create(builder.obj())


async def _all_bound(api: ApiClient, names: list[str]) -> bool:
    for name in names:
        pod = await get_or_none(api, "pods", name, "default")
        if not ((pod or {}).get("spec") or {}).get("nodeName"):
            return False
    return True


async def _bindings(api: ApiClient, name: str) -> list[str]:
    """Every nodeName the pod ever had, from etcd's log of its versions."""
    nodes: list[str] = []
    for version in await api.history("pods", name, "default"):
        node = ((version.get("object") or {}).get("spec") or {}).get("nodeName")
        if node and (not nodes or nodes[-1] != node):
            nodes.append(str(node))
    return nodes


async def test_issue11_scheduler_standby_takes_over_from_a_stopped_leader(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    ha_cluster.add_apiserver()
    async with ApiClient(ha_cluster.targets, retry_seconds=30) as api:
        for node in ("n1", "n2"):
            builder = make_node(node).capacity({"cpu": "8", "memory": "16Gi", "pods": "110"})
            builder.condition("Ready", "True")
            await api.create(builder.obj())
        first = ha_cluster.add_service("scheduler-a", "skiff.scheduler",
                                       ["--leader-elect-identity", "scheduler-a", *ELECTION])
        await wait_for(lambda: _is(api, "scheduler-a"), what="scheduler-a to lead")
        ha_cluster.add_service("scheduler-b", "skiff.scheduler",
                               ["--leader-elect-identity", "scheduler-b", *ELECTION])
        before = [f"before-{i}" for i in range(4)]
        await _create_pods(api, before)
        await wait_for(lambda: _all_bound(api, before), timeout=30, what="pods bound by a")
        assert await _holder(api) == "scheduler-a"

        first.signal(signal.SIGSTOP)  # frozen: it cannot renew, nor know it lost the lease
        try:
            await wait_for(lambda: _is(api, "scheduler-b"), timeout=30,
                           what="scheduler-b to take the lease")
            during = [f"during-{i}" for i in range(4)]
            await _create_pods(api, during)
            await wait_for(lambda: _all_bound(api, during), timeout=30,
                           what="pods bound by the new leader")
        finally:
            first.signal(signal.SIGCONT)

        # The old leader wakes up: it must stand down, and the new one keeps scheduling.
        after = [f"after-{i}" for i in range(4)]
        await _create_pods(api, after)
        await wait_for(lambda: _all_bound(api, after), timeout=30, what="pods bound after")
        assert await _holder(api) == "scheduler-b"
        for name in before + during + after:
            assert len(await _bindings(api, name)) == 1, f"pod {name} bound more than once"
        lease = await api.get("leases", "kube-scheduler", "kube-system")
        assert lease["spec"]["leaseTransitions"] == 1


async def _is(api: ApiClient, identity: str) -> bool:
    return await _holder(api) == identity
