"""Fixtures for the real-partition scenarios (SPEC SC2): a `skiff up --netns` cluster per
test, a size-1 StatefulSet `db` running the at-most-one checker on an RWO volume, and
helpers that read the heartbeat log the real pod processes write on the host.

Timings are compressed so every scenario fits in well under a minute: node Leases of 2 s
renewed every 0.5 s, node-monitor grace 3 s, default unreachable toleration 2 s, fencing
delay 2 s, a pod grace period of 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from skiff.api import ApiError, Reason, get_condition
from skiff.api.types import Obj
from skiff.checker import heartbeat as heartbeat_module
from skiff.checker.report import overlaps, parse_lines
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.netns.commands import ns_exec
from skiff.kubelet.sandbox.network import pod_netns_name
from skiff.procfs import read_stat
from tests.integration.waiting import get_or_none as get_or_none
from tests.integration.waiting import wait_for as wait_for

T = TypeVar("T")

NAMESPACE = "default"
GRACE_SECONDS = 3.0  # node-monitor grace period
TOLERATION_SECONDS = 2
FENCING_DELAY = 2.0
LEASE_SECONDS = 2
TIMINGS: dict[str, list[str]] = {
    "apiserver": ["--default-unreachable-toleration-seconds", str(TOLERATION_SECONDS),
                  "--default-not-ready-toleration-seconds", str(TOLERATION_SECONDS),
                  "--etcd-request-timeout", "2s", "--etcd-retry-seconds", "1"],
    "scheduler": ["--pod-initial-backoff-seconds", "0.2", "--pod-max-backoff-seconds", "1"],
    "controller-manager": [
        "--node-monitor-grace-period", f"{GRACE_SECONDS:g}s", "--node-monitor-period", "500ms",
        "--node-startup-grace-period", "10s", "--fencing-delay", f"{FENCING_DELAY:g}s",
        "--pod-gc-period", "1s", "--pod-gc-quarantine-time", "2s",
        "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
        "--leader-elect-retry-period", "500ms"],
    "kubelet": ["--node-lease-duration-seconds", str(LEASE_SECONDS),
                "--node-lease-renew-interval", "500ms", "--node-status-update-frequency", "1s",
                "--sync-frequency", "1s"],
    "fence-agent": ["--resync-period", "0.5s", "--confirm-timeout", "5s"],
}


def _missing() -> str:
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "real partitions need root (ip netns, nftables)"
    for tool in ("ip", "nft", "etcd"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    return ""


@pytest.fixture(autouse=True)
def _real_partitions_possible() -> None:
    """Never skip: a machine that cannot cut networks fails these tests, saying why
    (.ci/run installs iproute2 and nftables; CI runs as root)."""
    missing = _missing()
    if missing:
        pytest.fail(f"SC2 scenarios need real network cuts: {missing}", pytrace=False)

StartCluster = Callable[..., NetnsCluster]


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """`start(**kwargs)` brings up a NetnsCluster (kwargs as NetnsCluster's); every
    process, namespace and nftables table of it is removed when the test ends."""
    clusters: list[NetnsCluster] = []

    def start(**kwargs: Any) -> NetnsCluster:
        extra = {k: list(v) for k, v in TIMINGS.items()}
        for kind, args in kwargs.pop("extra_args", {}).items():
            extra.setdefault(kind, []).extend(args)
        cluster = NetnsCluster(tmp_path / "cluster", extra_args=extra, **kwargs)
        clusters.append(cluster)
        cluster.start(echo=lambda _line: None)
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.stop()


@pytest.fixture
async def api_of() -> AsyncIterator[Callable[[NetnsCluster], Awaitable[ApiClient]]]:
    clients: list[ApiClient] = []

    async def connect(cluster: NetnsCluster) -> ApiClient:
        client = ApiClient(cluster.api, retry_seconds=10, timeout=5,
                           credentials=cluster.admin)
        await client.__aenter__()
        clients.append(client)
        return client

    yield connect
    for client in clients:
        await client.__aexit__(None, None, None)


# -- reachability ------------------------------------------------------------------------

_PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[2]))
try:
    s.connect((sys.argv[1], 9))
except ConnectionRefusedError:
    pass  # the host answered (RST): reachable
except OSError:
    sys.exit(1)  # no answer: the packets were dropped
"""


async def reaches(cluster: NetnsCluster, src: str, dst: str, *, timeout: float = 2.0) -> bool:
    """Whether a TCP SYN from host `src` to host `dst` gets any answer (a refused connection
    counts: it proves the packets flow). A cut drops them, so the connect times out."""
    assert cluster.network is not None
    here, there = cluster.network.host(src), cluster.network.host(dst)
    proc = await asyncio.create_subprocess_exec(
        *ns_exec(here.netns, [sys.executable, "-c", _PROBE, there.ip, str(timeout)]),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await proc.wait() == 0


# -- waiting -----------------------------------------------------------------------------






# -- the pet -----------------------------------------------------------------------------


def heartbeat_log(cluster: NetnsCluster) -> Path:
    return cluster.data_dir / "heartbeats" / "heartbeats.log"


# A pod sees its own root, not the node's (AU8): the checker's script and its log
# directory reach it as hostPath volumes, at the same paths.
CHECKER_DIR = str(Path(heartbeat_module.__file__).parent)


def db_stateful_set(log: Path, *, grace: int = 2) -> Obj:
    """A size-1 StatefulSet whose pod is the at-most-one checker on an RWO claim."""
    log.parent.mkdir(parents=True, exist_ok=True)
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "terminationGracePeriodSeconds": grace,
                    "containers": [{
                        "name": "db", "image": "skiff/checker",
                        "command": ["python3", f"{CHECKER_DIR}/heartbeat.py",
                                    "--log", str(log), "--volume", "data",
                                    "--interval", "0.1"],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {
                                "fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_UID", "valueFrom": {
                                "fieldRef": {"fieldPath": "metadata.uid"}}}],
                        "volumeMounts": [
                            {"name": "data", "mountPath": "/data"},
                            {"name": "checker", "mountPath": CHECKER_DIR,
                             "readOnly": True},
                            {"name": "log", "mountPath": str(log.parent)}]}],
                    "volumes": [
                        {"name": "checker", "hostPath": {"path": CHECKER_DIR}},
                        {"name": "log", "hostPath": {"path": str(log.parent)}}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


async def set_unschedulable(api: ApiClient, node: str, value: bool) -> None:
    for _ in range(10):
        obj = await api.get("nodes", node)
        obj.setdefault("spec", {})["unschedulable"] = value
        try:
            await api.update(obj)
            return
        except ApiError as err:
            if err.reason != Reason.CONFLICT:
                raise


async def wait_nodes_ready(api: ApiClient, count: int) -> None:
    async def ready() -> bool:
        nodes: list[Obj] = (await api.list("nodes"))["items"]
        return sum(bool((get_condition(n, "Ready") or {}).get("status") == "True")
                   for n in nodes) >= count
    await wait_for(ready, timeout=30, what=f"{count} nodes Ready")


async def node_ready_status(api: ApiClient, node: str) -> str:
    obj = await api.get("nodes", node)
    return str((get_condition(obj, "Ready") or {}).get("status"))


async def running_db(api: ApiClient, *, other_than: str = "", timeout: float = 30) -> Obj:
    """db-0 Running (with a UID other than `other_than`), once it has beaten."""
    async def check() -> Obj | None:
        pod = await get_or_none(api, "pods", "db-0", NAMESPACE)
        if pod is None or pod["metadata"]["uid"] == other_than:
            return None
        if pod["metadata"].get("deletionTimestamp"):
            return None
        return pod if pod.get("status", {}).get("phase") == "Running" else None
    running: Obj = await wait_for(check, timeout=timeout, what="db-0 Running" + (
        f" with a UID other than {other_than}" if other_than else ""))
    return running


async def start_db_on(api: ApiClient, cluster: NetnsCluster, node: str) -> Obj:
    """Create `db` with every other node cordoned, so db-0 lands on `node`; uncordon."""
    await wait_nodes_ready(api, cluster.nodes)
    others = [f"node-{i}" for i in range(1, cluster.nodes + 1) if f"node-{i}" != node]
    for other in others:
        await set_unschedulable(api, other, True)
    await api.create(db_stateful_set(heartbeat_log(cluster)))
    pod = await running_db(api)
    assert pod["spec"]["nodeName"] == node
    for other in others:
        await set_unschedulable(api, other, False)
    await wait_for(lambda: beats_of(cluster, pod["metadata"]["uid"]), timeout=10,
                   what="db-0's first heartbeat")
    return pod


def log_lines(cluster: NetnsCluster) -> list[str]:
    try:
        return heartbeat_log(cluster).read_text().splitlines()
    except FileNotFoundError:
        return []


async def beats_of(cluster: NetnsCluster, uid: str) -> int:
    return sum(1 for b in parse_lines(log_lines(cluster)) if b.uid == uid)


def uids_in_log(cluster: NetnsCluster) -> list[str]:
    seen: list[str] = []
    for b in parse_lines(log_lines(cluster)):
        if b.uid not in seen:
            seen.append(b.uid)
    return seen


def assert_no_overlap(cluster: NetnsCluster) -> None:
    lines = log_lines(cluster)
    assert lines, "the checker wrote no heartbeat"
    found = overlaps(lines)
    assert found == [], f"two processes of one identity were alive at once: {found}"


def container_pid(pod: Obj) -> int:
    status = pod["status"]["containerStatuses"][0]
    return int(str(status["containerID"]).removeprefix("process://"))


def alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.alive


def in_netns(pid: int, netns: str) -> bool:
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino
    return False


def in_pod_sandbox(pid: int, pod: Obj, kubelet_pid: int) -> bool:
    """SB1: a pod's processes live in the sandbox its kubelet made (on the node's pod
    network, which a partition of the node cuts too, SB2), not in the kubelet's namespace.
    The kubelet runs under `ip netns exec`, in a mount namespace of its own, so the
    sandbox's /run/netns entry is looked up through the kubelet's root."""
    sandbox = f"/proc/{kubelet_pid}/root/run/netns/{pod_netns_name(str(pod['metadata']['uid']))}"
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(sandbox).st_ino
    return False


async def fences(api: ApiClient) -> list[Obj]:
    items: list[Obj] = (await api.list("fences"))["items"]
    return items


async def events(api: ApiClient, *, reason: str, namespace: str | None = None) -> list[Obj]:
    items: list[Obj] = (await api.list("events", namespace))["items"]
    return [e for e in items if e.get("reason") == reason]
