"""Two controller-managers on one Lease: only the leader acts; when it is killed (SIGKILL,
no release) the standby takes over within the lease duration and nothing is done twice."""

from __future__ import annotations

import asyncio
import uuid

from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import events, wait_for
from tests.integration.controller_manager.workloads import replica_set

LEASE_DURATION, RETRY = 3.0, 0.25


async def _holder(api: ApiClient, lease: str) -> str:
    try:
        obj = await api.get("leases", lease, "kube-system")
    except Exception:
        return ""
    return str(obj["spec"].get("holderIdentity") or "")


async def _pod_names(api: ApiClient, namespace: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in (await api.list("pods", namespace))["items"])


async def test_standby_takes_over_within_the_lease_and_acts_once(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    lease = f"cm-{uuid.uuid4().hex[:8]}"
    first = controller_manager("--controllers", "replicaset", lease=lease, name=f"{lease}-a")
    await wait_for(lambda: _holder(api, lease), timeout=10, what="a leader")
    controller_manager("--controllers", "replicaset", lease=lease, name=f"{lease}-b")
    assert await _holder(api, lease) == f"{lease}-a"

    await api.create(replica_set("app", namespace, replicas=3))

    async def count(n: int) -> bool:
        return len(await _pod_names(api, namespace)) == n

    await wait_for(lambda: count(3), timeout=10, what="3 pods")
    first.kill()

    async def b_leads() -> bool:
        return await _holder(api, lease) == f"{lease}-b"

    await wait_for(b_leads, timeout=LEASE_DURATION + 15, interval=0.05,
                   what="the standby to take the lease")
    # Timed from the Lease's own record: a's last renewTime to b's acquireTime. Not before
    # the lease expired (the rule), and within a few retry periods after (plus slack).
    versions = [v["object"]["spec"] for v in await api.history("leases", lease, "kube-system")
                if v["object"]]
    last_renew = max(parse_rfc3339(s["renewTime"]) for s in versions
                     if s.get("holderIdentity") == f"{lease}-a")
    acquired = parse_rfc3339(versions[-1]["acquireTime"])
    took = acquired - last_renew
    assert LEASE_DURATION - 0.1 <= took <= LEASE_DURATION + 4 * RETRY + 1.5, (
        f"b acquired the lease {took:.2f}s after a's last renewal")

    # The new leader neither recreates the 3 pods nor misses the scale-up.
    rs = await api.get("replicasets", "app", namespace)
    rs["spec"]["replicas"] = 5
    await api.update(rs)
    await wait_for(lambda: count(5), timeout=10, what="5 pods")
    await asyncio.sleep(1.5)
    assert len(await _pod_names(api, namespace)) == 5
    created = await events(api, namespace, reason="SuccessfulCreate")
    assert sum(int(e.get("count", 1)) for e in created) == 5
    by_instance = sorted(e["reportingInstance"] for e in created)
    assert by_instance == [f"{lease}-a"] * 3 + [f"{lease}-b"] * 2
