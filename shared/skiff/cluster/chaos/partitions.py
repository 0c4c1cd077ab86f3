"""The partition seam: `skiff chaos partition|heal` over whichever cluster is there.

A `skiff up --netns` cluster (its cluster.json has a `netns` section) is cut with nftables
inside its namespaces (`netns.partitions`); otherwise the compose cluster of a project is
cut with Docker (`docker`). Both answer the same two calls with the lines to print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from skiff.cluster.chaos.docker import DockerPartitions
from skiff.cluster.netns.hosts import network_of
from skiff.cluster.netns.partitions import NetnsPartitions
from skiff.cluster.state import ClusterState

__all__ = ["Partitions", "partitions_for"]


class Partitions(Protocol):
    def partition(self, node: str, from_component: str | None = None) -> list[str]:
        """Cut `node` from every other component, or from `from_component` only."""

    def heal(self, node: str | None = None) -> list[str]:
        """Undo every cut of `node`, or every cut when None."""


def partitions_for(data_dir: Path, *, project: str) -> Partitions:
    """The netns cluster recorded in `data_dir`, else the compose project `project`."""
    state = ClusterState.load(data_dir)
    if state is not None and state.netns:
        return NetnsPartitions(network_of(state), data_dir)
    return DockerPartitions(project)
