"""HA recovery benchmark (issue 11): per control-plane failure scenario, the time until the
cluster recovers, printed in seconds and as a ratio to the configured timeout that bounds
it (etcd's election timeout, the leaders' Lease duration, the apiserver's etcd request
timeout), so a figure reads as "how many timeouts did recovery take".

One `skiff up --ha --netns` topology (root only: network namespaces, nftables) with the
scenario tests' compressed timings (tests/integration/ha/test_scenarios.py), then:

* etcd leader killed → a new leader (every survivor agrees), and the first acknowledged
  write after the kill;
* etcd minority partition of apiserver-1's first member → the first acknowledged write
  through apiserver-1 (its etcd client moves to the majority);
* apiserver-1 killed → the first acknowledged write by a client that lists both apiservers;
* scheduler leader isolated from the apiservers → the standby holds the Lease, and the
  first binding it makes;
* controller-manager leader isolated → the standby holds the Lease, and the first write
  it makes as leader (a ReplicaSet pod replaced).

Run: `sudo .venv/bin/python bench/ha_recovery.py [--rounds 1]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skiff.api import ApiError
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.netns.commands import require_netns_support
from skiff.cluster.topology import HA
from tests.integration.ha.scenarios import lease, member_is_leader, member_leader
from tests.integration.ha.test_scenarios import ELECTION
from tests.integration.partitions.conftest import TIMINGS

ETCD_ELECTION_TIMEOUT = 1.0  # etcd's default --election-timeout (ms 1000)
LEASE_DURATION = 3.0  # ELECTION: --leader-elect-lease-duration 3s (both leaders)
ETCD_REQUEST_TIMEOUT = 2.0  # TIMINGS["apiserver"]: --etcd-request-timeout 2s
POLL = 0.05
Obj = dict[str, Any]


async def until(check: Callable[[], Awaitable[object]], timeout: float = 120) -> float:
    """Seconds until `check` is truthy (polled every POLL)."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise TimeoutError("no recovery within the bench's bound")
        await asyncio.sleep(POLL)
    return time.monotonic() - start


async def can_write(client: ApiClient, ns: str) -> bool:
    try:
        await client.create(lease(f"b-{uuid.uuid4().hex[:8]}", ns))
    except ApiError:
        return False
    return True


async def holder(api: ApiClient, name: str) -> str:
    try:
        obj = await api.get("leases", name, "kube-system")
    except ApiError:
        return ""
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def pod(name: str, ns: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


def report(scenario: str, what: str, seconds: float, timeout: float, name: str) -> None:
    print(f"{scenario:<38} {what:<42} {seconds:7.2f}s  {seconds / timeout:5.2f}x {name} "
          f"({timeout:g}s)")


async def run_round(cluster: NetnsCluster) -> None:
    etcd = {n: cluster.component(n).address for n in ("etcd-1", "etcd-2", "etcd-3")}
    api1, api2 = (cluster.component(f"apiserver-{i}").address for i in (1, 2))
    async with ApiClient(cluster.api, retry_seconds=30, timeout=10) as api, \
            ApiClient(f"{api1},{api2}", retry_seconds=0.5, timeout=3) as both, \
            ApiClient(api1, retry_seconds=0.5, timeout=3) as only_1:
        ns = f"bench-{uuid.uuid4().hex[:6]}"
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

        # etcd leader killed.
        leader = next(n for n in etcd if member_is_leader(etcd[n]))
        others = [n for n in etcd if n != leader]
        old = member_leader(etcd[others[0]])
        cluster.kill(leader)
        start = time.monotonic()

        async def new_leader() -> bool:
            ids = {member_leader(etcd[n]) for n in others}
            return len(ids) == 1 and "" not in ids and old not in ids

        elected = await until(new_leader)
        await until(lambda: can_write(both, ns))
        wrote = time.monotonic() - start
        report("etcd leader killed", "new etcd leader", elected, ETCD_ELECTION_TIMEOUT,
               "election timeout")
        report("", "first acknowledged write", wrote, ETCD_ELECTION_TIMEOUT,
               "election timeout")
        cluster.restart(leader)
        await until(lambda: can_write(api, ns))

        # etcd minority partition of apiserver-1's first member.
        if member_is_leader(etcd["etcd-1"]):
            cluster.kill("etcd-1")
            cluster.restart("etcd-1")
            await until(lambda: can_write(only_1, ns))
        cluster.partition("etcd-1")
        start = time.monotonic()
        try:
            await asyncio.sleep(0.2)  # let the cut bite before the first attempt
            wrote = await until(lambda: can_write(only_1, ns)) + 0.2
        finally:
            cluster.heal("etcd-1")
        report("etcd minority partition (apiserver-1)", "first write through apiserver-1",
               wrote, ETCD_REQUEST_TIMEOUT, "etcd request timeout")

        # apiserver-1 killed.
        await until(lambda: can_write(both, ns))
        cluster.kill("apiserver-1")
        wrote = await until(lambda: can_write(both, ns))
        report("apiserver-1 killed", "first write by a failing-over client", wrote,
               ETCD_REQUEST_TIMEOUT, "etcd request timeout")
        cluster.restart("apiserver-1")

        # Scheduler leader isolated.
        sched = await holder(api, "kube-scheduler")
        other = next(n for n in ("scheduler-1", "scheduler-2") if n != sched)
        cluster.partition(sched, "apiserver")
        start = time.monotonic()
        try:
            taken = await until(lambda: _is(api, "kube-scheduler", other))
            name = f"p-{uuid.uuid4().hex[:6]}"
            await api.create(pod(name, ns))
            await until(lambda: _bound(api, name, ns))
            bound = time.monotonic() - start
        finally:
            cluster.heal(sched)
        report("scheduler leader isolated", "standby holds the Lease", taken,
               LEASE_DURATION, "lease duration")
        report("", "first binding by the new leader", bound, LEASE_DURATION,
               "lease duration")

        # Controller-manager leader isolated.
        cm = await holder(api, "skiff-controller-manager")
        other = next(n for n in ("controller-manager-1", "controller-manager-2") if n != cm)
        cluster.partition(cm, "apiserver")
        start = time.monotonic()
        try:
            taken = await until(lambda: _is(api, "skiff-controller-manager", other))
            victim = await _rs_pod(api)
            await api.delete("pods", victim, "default", grace_period_seconds=0)
            await until(lambda: _replaced(api, victim))
            replaced = time.monotonic() - start
        finally:
            cluster.heal(cm)
        report("controller-manager leader isolated", "standby holds the Lease", taken,
               LEASE_DURATION, "lease duration")
        report("", "first write by the new leader (RS pod)", replaced, LEASE_DURATION,
               "lease duration")
        await api.delete("namespaces", ns)


async def _is(api: ApiClient, name: str, who: str) -> bool:
    return await holder(api, name) == who


async def _bound(api: ApiClient, name: str, ns: str) -> bool:
    try:
        return bool(((await api.get("pods", name, ns)).get("spec") or {}).get("nodeName"))
    except ApiError:
        return False


async def _rs_pod(api: ApiClient) -> str:
    pods = (await api.list("pods", "default", label_selector="app=bench-rs"))["items"]
    return str(pods[0]["metadata"]["name"])


async def _replaced(api: ApiClient, victim: str) -> bool:
    pods = (await api.list("pods", "default", label_selector="app=bench-rs"))["items"]
    names = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    return victim not in names and len(names) >= 1


def replica_set() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "bench-rs", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "bench-rs"}},
                     "template": {"metadata": {"labels": {"app": "bench-rs"}},
                                  "spec": pod("x", "default")["spec"]}}}


async def main_async(args: argparse.Namespace) -> None:
    extra = {k: list(v) for k, v in TIMINGS.items()}
    extra["scheduler"] = [*extra["scheduler"], *ELECTION]
    with tempfile.TemporaryDirectory(prefix="skiff-ha-bench-") as tmp:
        cluster = NetnsCluster(Path(tmp) / "cluster", topology=HA, nodes=1, extra_args=extra,
                               fence_agent=False)
        try:
            cluster.start(echo=lambda _line: None)
            async with ApiClient(cluster.api, retry_seconds=30) as api:
                await api.create(replica_set())
                await until(lambda: _rs_pod_exists(api))
            print(f"timings: etcd election timeout {ETCD_ELECTION_TIMEOUT:g}s, leader Lease "
                  f"{LEASE_DURATION:g}s (renew deadline 2s, retry 0.5s), apiserver etcd "
                  f"request timeout {ETCD_REQUEST_TIMEOUT:g}s")
            for round_ in range(args.rounds):
                print(f"\nround {round_ + 1}")
                await run_round(cluster)
        finally:
            cluster.stop()


async def _rs_pod_exists(api: ApiClient) -> bool:
    return bool((await api.list("pods", "default", label_selector="app=bench-rs"))["items"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    require_netns_support()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
