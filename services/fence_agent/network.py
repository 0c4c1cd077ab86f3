"""The network agent (SPEC FN2): cut a node off from the cluster and its storage.

Docker mode disconnects the node's container from every network of the compose project
(`skiff.cli.chaos.partition`, the same cut `skiff chaos partition` makes) and confirms with
`docker inspect` that it has no network left; unfencing reconnects it with its service
alias (`chaos.heal`). Local mode has no network between nodes to cut: every kubelet shares
the host's loopback, so the agent refuses (`UnsupportedAgent`) rather than pretend.
"""

from __future__ import annotations

import asyncio

from skiff.cli import chaos
from skiff.fence_agent.agent import FenceError, FenceStatus, UnsupportedAgent
from skiff.fence_agent.docker import DockerCli

__all__ = ["LOCAL_MODE_MESSAGE", "DockerNetworkAgent", "local_network_agent"]

LOCAL_MODE_MESSAGE = (
    "network fencing needs the compose cluster or network namespaces: in local mode every "
    "node shares the host's network, so there is nothing to cut; use the power or storage "
    "agent (skiff fence NODE --agent power)")


def local_network_agent() -> UnsupportedAgent:
    return UnsupportedAgent(reason=LOCAL_MODE_MESSAGE)


class DockerNetworkAgent:
    def __init__(self, *, docker: DockerCli) -> None:
        self.docker = docker

    async def fence(self, node: str) -> str:
        try:
            message = await asyncio.to_thread(chaos.partition, node,
                                               project=self.docker.project)
        except chaos.ChaosError as err:
            raise FenceError(str(err)) from None
        status = await self.status(node)
        if not status.fenced:
            raise FenceError(f"disconnected node {node}, but {status.message}")
        return message

    async def unfence(self, node: str) -> str:
        try:
            return await asyncio.to_thread(chaos.heal, node, project=self.docker.project)
        except chaos.ChaosError as err:
            raise FenceError(str(err)) from None

    async def status(self, node: str) -> FenceStatus:
        try:
            container = await self.docker.inspect_service(node)
        except FenceError as err:
            return FenceStatus(fenced=False, message=str(err))
        networks = sorted((container.get("NetworkSettings") or {}).get("Networks") or {})
        if networks:
            return FenceStatus(fenced=False, message=f"container {self.docker.name(container)}"
                               f" is still on {', '.join(networks)}")
        return FenceStatus(fenced=True, message=f"container {self.docker.name(container)} is "
                                                "on no network")
