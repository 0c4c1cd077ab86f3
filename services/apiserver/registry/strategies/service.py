"""Services' strategy (`pkg/registry/core/service/strategy.go` and its REST storage): a
Service holds a cluster IP (AX7) and node ports beside the object, taken on create, kept
or changed on a spec update (the fields a client may not clear are carried over), and
freed when the write is not stored or the Service is deleted. The allocators are the
apiserver's (service/clusterip.py, service/nodeports.py); without them (unit tests)
nothing is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skiff.api.types import Obj
from skiff.apiserver.registry.service import clusterip, nodeports
from skiff.apiserver.registry.strategy import Held, Strategy


@dataclass
class _ServiceHeld(Held):
    """The IPs and ports one Service write took, and the ports it gave up."""

    strategy: ServiceStrategy
    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    freed_ports: list[int] = field(default_factory=list)

    async def give_back(self) -> None:
        if self.ips and self.strategy.service_ips is not None:
            await self.strategy.service_ips.release(self.ips)
        if self.ports and self.strategy.node_ports is not None:
            await self.strategy.node_ports.release(self.ports)

    async def commit(self) -> None:
        if self.freed_ports and self.strategy.node_ports is not None:
            await self.strategy.node_ports.release(self.freed_ports)


class ServiceStrategy(Strategy):
    """Services, with the apiserver's allocators (None: not allocated)."""

    def __init__(self, kind: str = "Service") -> None:
        super().__init__(kind)
        self.service_ips: clusterip.ServiceIPs | None = None
        self.node_ports: nodeports.NodePorts | None = None

    def prepare_for_update(self, old: Obj, new: Obj, *, subresource: str) -> None:
        if subresource == "":
            clusterip.keep_on_update(old, new)
            nodeports.prepare_update(old, new)

    async def allocate(self, obj: Obj, *, dry_run: bool) -> Held:
        held = _ServiceHeld(self)
        if self.service_ips is not None:
            held.ips = await self.service_ips.allocate(obj, dry_run=dry_run)
        try:
            if self.node_ports is not None:
                held.ports = await self.node_ports.allocate(obj, dry_run=dry_run)
        except BaseException:
            await held.give_back()
            raise
        return held

    async def allocate_update(self, old: Obj, new: Obj, *, subresource: str,
                              dry_run: bool) -> Held:
        held = _ServiceHeld(self)
        if subresource == "" and self.node_ports is not None:
            held.ports, held.freed_ports = await self.node_ports.allocate_update(
                old, new, dry_run=dry_run)
        return held

    async def released(self, obj: Obj) -> None:
        """AX7: a deleted Service's cluster IP and node ports are free again."""
        if self.service_ips is not None:
            await self.service_ips.release_service(obj)
        if self.node_ports is not None:
            await self.node_ports.release_service(obj)
