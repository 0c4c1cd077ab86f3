"""Fencing benchmark (issue 7, SPEC FN/SC2): time from a real partition to the first
heartbeat of the replacement of a size-1 StatefulSet's pet, with and without fencing.

Each run brings up a `skiff up --netns` cluster (root only: network namespaces, nftables),
starts `db` (the at-most-one checker on an RWO claim) on node-1, cuts node-1 from every
other host and watches the API and the checker's log:

* with fencing (power agent): node Unknown → Fence requested → Fenced → pods force deleted
  → `db-0` recreated, scheduled, its volume attached elsewhere → first heartbeat;
* without (agent `none`): within a bounded wait nothing replaces `db-0` (Kubernetes' answer:
  a human must act). Then the bench plays the human and deletes the Node; PodGC force
  deletes the pod after its quarantine, and the time from that deletion is measured.

Timings are the scenario tests' compressed ones (tests/integration/partitions/conftest.py)
and printed with the figures, so each figure can be read as the sum of configured delays
plus the cluster's own reaction time. Every checker log is also checked for overlaps.

Run: `sudo /tmp/venv/bin/python bench/fencing.py [--rounds 1] [--unfenced-wait 15]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

# The scenario tests' StatefulSet and timings are reused, so bench and tests measure the same.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skiff.api import get_condition
from skiff.checker.report import overlaps, time_to_first_heartbeat
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.netns.commands import require_netns_support
from tests.integration.partitions.conftest import (
    FENCING_DELAY,
    GRACE_SECONDS,
    LEASE_SECONDS,
    NAMESPACE,
    TIMINGS,
    TOLERATION_SECONDS,
    get_or_none,
    log_lines,
    start_db_on,
)

POLL = 0.05
PGC_QUARANTINE = 2.0  # --pod-gc-quarantine-time in TIMINGS


class Milestones:
    """Monotonic times (relative to the cut) at which each step was first observed."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.seen: dict[str, float] = {}

    def mark(self, name: str) -> None:
        self.seen.setdefault(name, time.monotonic() - self.start)


async def observe(api: ApiClient, m: Milestones, old_uid: str, *, until: float,
                  stop_on_heartbeat: bool, cluster: NetnsCluster) -> float | None:
    while time.monotonic() < until:
        node = await get_or_none(api, "nodes", "node-1")
        if node is None:
            m.mark("node deleted")
        elif (get_condition(node, "Ready") or {}).get("status") == "Unknown":
            m.mark("node Unknown")
        fence = await get_or_none(api, "fences", "node-1")
        if fence is not None:
            m.mark("Fence requested")
            if (fence.get("status") or {}).get("phase") == "Fenced":
                m.mark("Fenced (agent confirmed)")
        pod = await get_or_none(api, "pods", "db-0", NAMESPACE)
        if pod is not None and pod["metadata"]["uid"] == old_uid and \
                pod["metadata"].get("deletionTimestamp"):
            m.mark("db-0 Terminating")
        if pod is None or pod["metadata"]["uid"] != old_uid:
            m.mark("old db-0 gone")
        if pod is not None and pod["metadata"]["uid"] != old_uid:
            m.mark("new db-0 created")
            if pod.get("status", {}).get("phase") == "Running":
                m.mark("new db-0 Running")
        first = time_to_first_heartbeat(log_lines(cluster), "db-0", m.start)
        if first is not None:
            m.seen.setdefault("new db-0 first heartbeat", first)
            if stop_on_heartbeat:
                return first
        await asyncio.sleep(POLL)
    return None


def new_cluster(root: Path, *, fencing: bool) -> NetnsCluster:
    extra = {k: list(v) for k, v in TIMINGS.items()}
    annotations: dict[str, str] = {}
    if not fencing:
        extra["controller-manager"] += ["--default-fence-agent", "none"]
        annotations = {f"node-{i}": "skiff.io/fence-agent=none" for i in (1, 2, 3)}
    return NetnsCluster(root, nodes=3, extra_args=extra, node_annotations=annotations)


async def run_once(root: Path, *, fencing: bool, unfenced_wait: float) -> dict[str, object]:
    cluster = new_cluster(root, fencing=fencing)
    cluster.start(echo=lambda _line: None)
    try:
        async with ApiClient(cluster.api, retry_seconds=10, timeout=5) as api:
            old = await start_db_on(api, cluster, "node-1")
            cut = time.monotonic()
            cluster.partition("node-1")
            m = Milestones(cut)
            result: dict[str, object] = {"milestones": m.seen}
            if fencing:
                result["recovery"] = await observe(api, m, old["metadata"]["uid"],
                                                   until=cut + 60, stop_on_heartbeat=True,
                                                   cluster=cluster)
            else:
                none = await observe(api, m, old["metadata"]["uid"],
                                     until=cut + unfenced_wait, stop_on_heartbeat=True,
                                     cluster=cluster)
                result["replaced_within_wait"] = none
                deleted_at = time.monotonic()
                await api.delete("nodes", "node-1")
                after = await observe(api, m, old["metadata"]["uid"], until=deleted_at + 60,
                                      stop_on_heartbeat=True, cluster=cluster)
                result["from_node_deletion"] = (None if after is None
                                                else after - (deleted_at - cut))
                result["recovery"] = after
            result["overlaps"] = len(overlaps(log_lines(cluster)))
            return result
    finally:
        cluster.stop()


def fmt(value: object) -> str:
    return f"{value:.2f}s" if isinstance(value, float) else "never"


async def main_async(args: argparse.Namespace) -> None:
    print(f"timings: node lease {LEASE_SECONDS}s (renew 0.5s), node-monitor grace "
          f"{GRACE_SECONDS:g}s (period 0.5s), unreachable toleration {TOLERATION_SECONDS}s, "
          f"fencing delay {FENCING_DELAY:g}s, pod grace 2s, PodGC quarantine "
          f"{PGC_QUARANTINE:g}s (period 1s), heartbeat interval 0.1s")
    for fencing in (True, False):
        for round_ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="skiff-bench-fencing-") as tmp:
                r = await run_once(Path(tmp), fencing=fencing,
                                   unfenced_wait=args.unfenced_wait)
            label = "with fencing (power)" if fencing else "without fencing (none)"
            print(f"\n{label}, round {round_ + 1}: overlaps {r['overlaps']}")
            milestones = r["milestones"]
            assert isinstance(milestones, dict)
            for name, at in sorted(milestones.items(), key=lambda kv: kv[1]):
                print(f"  {at:7.2f}s  {name}")
            if fencing:
                print(f"  partition → replacement's first heartbeat: {fmt(r['recovery'])} "
                      f"(configured: grace {GRACE_SECONDS:g}s + fencing delay "
                      f"{FENCING_DELAY:g}s = {GRACE_SECONDS + FENCING_DELAY:g}s, counted from "
                      f"the last lease renewal before the cut with 1 s timestamps, so up to "
                      f"~1.5 s less; the rest is fence + delete + schedule + attach + start)")
            else:
                print(f"  replaced within {args.unfenced_wait:g}s of the partition: "
                      f"{'yes' if r['replaced_within_wait'] is not None else 'no'}")
                print(f"  Node deleted by a human → first heartbeat: "
                      f"{fmt(r['from_node_deletion'])} (configured: PodGC quarantine "
                      f"{PGC_QUARANTINE:g}s, checked every 1s); partition → first heartbeat: "
                      f"{fmt(r['recovery'])}, i.e. whenever the human acts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--unfenced-wait", type=float, default=15.0,
                        help="seconds to show that, without fencing, nothing replaces db-0")
    args = parser.parse_args()
    require_netns_support()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
