"""SPEC DO1: the services are separate processes and only the apiserver talks to etcd.

Every component runs as a real process against one etcd; the test reads, per process, the
TCP connections it holds (its socket fds matched against /proc/<pid>/net/tcp{,6}) and
checks which of them go to etcd's client port.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import Process
from skiff.cluster.state import ClusterState
from tests.integration.cluster import Cluster
from tests.integration.objects import pod
from tests.integration.waiting import wait_for

ESTABLISHED = "01"


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def connections_to_port(pid: int, port: int) -> int:
    """How many established TCP connections process `pid` holds to remote `port`."""
    mine = _socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if (state == ESTABLISHED and inode in mine
                    and int(remote.rsplit(":", 1)[1], 16) == port):
                count += 1
    return count


async def test_do1_only_the_apiserver_holds_etcd_connections(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path).start()
    try:
        cluster.add_service("scheduler", "skiff.scheduler", [])
        cluster.add_service("controller-manager", "skiff.controller_manager", [
            "--leader-elect-resource-name", f"cm-{uuid.uuid4().hex[:6]}"])
        cluster.add_service("kubelet-n1", "skiff.kubelet", [
            "--node-name", "n1", "--root-dir", str(tmp_path / "n1"),
            "--node-status-update-frequency", "1s"])
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        ClusterState(api=cluster.api_target, data_dir=str(data_dir), components=[],
                     started=time.time()).save(data_dir)
        cluster.add_service("fence-agent", "skiff.fence_agent", [
            "--mode", "local", "--data-dir", str(data_dir), "--resync-period", "0.5s"])
        async with ApiClient(cluster.api_target, retry_seconds=20) as api:
            await api.create(pod("busy", "default"))

            async def running() -> bool:
                got = await api.get("pods", "busy", "default")
                return (got.get("status") or {}).get("phase") == "Running"

            # Every component has done its part (scheduled, started, reported) by now.
            await wait_for(running, timeout=60, what="the pod to be Running")
            others: dict[str, Process] = dict(cluster.services)
            held = {name: connections_to_port(proc.pid or 0, cluster.etcd_port)
                    for name, proc in others.items()}
            apiserver = connections_to_port(cluster.apiserver.pid or 0, cluster.etcd_port)
            assert apiserver >= 1, "the apiserver holds an etcd connection (the probe works)"
            assert held == dict.fromkeys(others, 0), f"etcd connections by component: {held}"
            await api.delete("pods", "busy", "default", grace_period_seconds=0)
    finally:
        cluster.stop()
