"""The cluster seam: one `Cluster` shape, composed from a topology and a launcher.

kind's `pkg/cluster` has a Provider that creates and deletes clusters whatever runs their
nodes; here `new_cluster()` picks the launcher — local processes (`local.LocalCluster`) or
one network namespace per host (`netns.cluster.NetnsCluster`) — and gives it the
control-plane `Topology` (`SINGLE` or `HA`). Partitions are the other seam
(`chaos.partitions`). Tests start clusters through here, or through a launcher directly,
without the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from skiff.cluster.config import ClusterConfig
from skiff.cluster.local import LocalCluster, stop_by_state
from skiff.cluster.netns.cluster import NetnsCluster, destroy_by_state
from skiff.cluster.netns.commands import require_netns_support
from skiff.cluster.processes import Process, StartError
from skiff.cluster.state import ClusterState
from skiff.cluster.supervisor import stop_supervisor
from skiff.cluster.topology import HA, SINGLE

__all__ = ["Cluster", "down", "new_cluster"]


class Cluster(Protocol):
    """A cluster this process starts: `start()` returns what cluster.json records, and
    `stop()` ends every process it started (and the pods) and says how many pod groups."""

    data_dir: Path
    processes: list[Process]  # this process's children, for the supervisor to reap

    def start(self, *, echo: Callable[[str], None] = print) -> ClusterState: ...

    def stop(self) -> str: ...


def new_cluster(data_dir: Path, *, nodes: int = 3, config: ClusterConfig | None = None,
                ha: bool = False, netns: bool = False, insecure: bool = False,
                apiserver_processes: int = 1, advertise_address: str = "") -> Cluster:
    """`skiff up [--ha] [--netns] [--advertise-address IP]`: a cluster not yet started."""
    topology = HA if ha else SINGLE
    config = config or ClusterConfig()
    if netns:
        if advertise_address:
            raise StartError("--advertise-address is for a cluster of local processes; "
                             "a --netns cluster's hosts have addresses of their own")
        require_netns_support()
        return NetnsCluster(data_dir, nodes=nodes, config=config, topology=topology,
                            insecure=insecure, mirror_pods=True)
    return LocalCluster(data_dir, nodes=nodes, config=config, topology=topology,
                        insecure=insecure, apiserver_processes=apiserver_processes,
                        advertise_address=advertise_address)


def down(data_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """`skiff down`: stop the cluster recorded in `data_dir`, its supervisor first."""
    state = ClusterState.load(data_dir)
    if state is not None and state.netns:
        return [*stop_supervisor(state.supervisor_pid, timeout=timeout, data_dir=data_dir),
                *destroy_by_state(data_dir, timeout=timeout)]
    return stop_by_state(data_dir, timeout=timeout)
