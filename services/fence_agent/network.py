"""The network agent (SPEC FN2): cut a node off from the cluster and its storage.

Docker mode disconnects the node's container from every network it is on — the same cut
`skiff chaos partition NODE` makes, but through the Engine API from the fence-agent
container, which has no docker command — and confirms by inspecting it that it has no
network left; unfencing reconnects it to every network of the compose project with its
service name as alias, so the cluster finds it by name again.

Local mode has no network between nodes to cut: every kubelet shares the host's loopback,
so the agent refuses (`UnsupportedAgent`) rather than pretend.
"""

from __future__ import annotations

from skiff.fence_agent.agent import FenceError, FenceStatus, UnsupportedAgent
from skiff.fence_agent.docker import DockerEngine

__all__ = ["LOCAL_MODE_MESSAGE", "DockerNetworkAgent", "local_network_agent"]

LOCAL_MODE_MESSAGE = (
    "network fencing needs the compose cluster or network namespaces: in local mode every "
    "node shares the host's network, so there is nothing to cut; use the power or storage "
    "agent (skiff fence NODE --agent power)")


def local_network_agent() -> UnsupportedAgent:
    return UnsupportedAgent(reason=LOCAL_MODE_MESSAGE)


class DockerNetworkAgent:
    def __init__(self, *, docker: DockerEngine) -> None:
        self.docker = docker

    async def fence(self, node: str) -> str:
        container = await self.docker.inspect_service(node)
        networks = sorted((container.get("NetworkSettings") or {}).get("Networks") or {})
        for network in networks:
            await self.docker.disconnect(network, container["Id"])
        status = await self.status(node)
        if not status.fenced:
            raise FenceError(f"disconnected node {node}, but {status.message}")
        if not networks:
            return f"container {self.docker.name(container)} was already on no network"
        return (f"disconnected container {self.docker.name(container)} from "
                f"{', '.join(networks)}")

    async def unfence(self, node: str) -> str:
        container = await self.docker.inspect_service(node)
        attached = set((container.get("NetworkSettings") or {}).get("Networks") or {})
        missing = [n for n in await self.docker.networks() if n not in attached]
        for network in missing:
            await self.docker.connect(network, container["Id"], alias=node)
        if not missing:
            return f"container {self.docker.name(container)} is on every network already"
        return (f"reconnected container {self.docker.name(container)} to "
                f"{', '.join(missing)} as {node}")

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
