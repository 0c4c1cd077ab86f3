"""Service node ports: allocated by the apiserver from `--service-node-port-range`.

Kubernetes gives every port of a NodePort or LoadBalancer Service a node port from one
range (default 30000-32767), shared by all Services and protocols; a port the user names is
kept if it is free and in the range, else the write is 422 Invalid on
`spec.ports[i].nodePort` with the allocator's words. Several apiservers may answer at once,
so, as the cluster-IP allocator (`clusterip.py`) does, Skiff holds each port with one etcd
key, `/skiff/servicenodeports/<port>`, created only if absent and naming the Service that
holds it; it sits outside `/registry/`, so the watch cache and the API never show it.

- create (`allocate`): ports sharing a `port` number share one node port (TCP and UDP 53);
  a LoadBalancer with `allocateLoadBalancerNodePorts: false` gets only the ports it names.
  Random picks come from the upper part of the range first, leaving the lower band for
  ports users name (Kubernetes' static subrange).
- update (`prepare_update`, then `allocate_update`): leaving a node port out keeps it;
  changing the type to ClusterIP or ExternalName clears the node ports the update did not
  change and frees them; new ports get new node ports, dropped ones are freed once the
  update is stored (`release`), and the ones held for an update that failed are freed too.
- delete (`release_service`): every node port the Service held is freed.
- repair (`NodePortRepair`): a port whose Service is gone, or no longer lists it (an
  apiserver died between holding and storing, or between storing and freeing), is freed
  once it has been seen so on two passes in a row with the same revision.

Traffic to node ports is not part of this: Skiff's nodes have no listeners in the host's
network namespace.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from skiff.api.errors import ApiError, Reason, invalid
from skiff.api.types import Obj
from skiff.apiserver.registry.service import holds
from skiff.apiserver.registry.service.holds import HoldRepair
from skiff.apiserver.storage.interface import Storage

__all__ = ["DEFAULT_NODE_PORT_RANGE", "NODE_PORT_PREFIX", "NodePortRepair", "NodePorts",
           "PortRange", "prepare_update"]

log = logging.getLogger(__name__)

DEFAULT_NODE_PORT_RANGE = "30000-32767"
NODE_PORT_PREFIX = "/skiff/servicenodeports/"
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


@dataclass(frozen=True)
class PortRange:
    """An inclusive range of ports, `base-max` (or `base+size`, as Kubernetes reads it)."""

    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        problem = (f"--service-node-port-range: {text!r} is not a port range (e.g. "
                   f"{DEFAULT_NODE_PORT_RANGE})")
        value = text.strip()
        try:
            if "+" in value:
                first, extra = value.split("+", 1)
                base, size = int(first), int(extra) + 1
            elif "-" in value:
                first, last = value.split("-", 1)
                base, size = int(first), int(last) - int(first) + 1
            else:
                base, size = int(value), 1
        except ValueError:
            raise ValueError(problem) from None
        if base < 1 or size < 1 or base + size - 1 > 65535:
            raise ValueError(problem)
        return cls(base, size)

    @property
    def last(self) -> int:
        return self.base + self.size - 1

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.base <= port <= self.last

    def __str__(self) -> str:
        return f"{self.base}-{self.last}"

    @property
    def static_band(self) -> int:
        """How many ports at the bottom random picks avoid while the rest has room:
        min(max(16, size/32), 128), none in a range of 16 or fewer."""
        if self.size <= 16:
            return 0
        return min(max(16, self.size // 32), 128)


def needs_node_ports(spec: Obj) -> bool:
    return spec.get("type") in _NODE_PORT_TYPES


def _allocates(spec: Obj) -> bool:
    """Whether ports without a node port get one (not so for a LoadBalancer that asks for
    `allocateLoadBalancerNodePorts: false`)."""
    return spec.get("type") == "NodePort" or (
        spec.get("type") == "LoadBalancer"
        and spec.get("allocateLoadBalancerNodePorts") is not False)


def _ports(spec: Obj) -> list[Obj]:
    return [p for p in spec.get("ports") or [] if isinstance(p, dict)]


def _node_port(port: Obj) -> int:
    value = port.get("nodePort")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def node_ports_of(service: Obj) -> list[int]:
    """The node ports a Service lists (whatever its type), in order, each once."""
    found: list[int] = []
    for port in _ports(service.get("spec") or {}):
        number = _node_port(port)
        if number and number not in found:
            found.append(number)
    return found


def _drop_unset(spec: Obj) -> None:
    """A node port of 0 is no node port (Go leaves it out of the object)."""
    for port in _ports(spec):
        if "nodePort" in port and (port["nodePort"] is None or (
                type(port["nodePort"]) is int and port["nodePort"] == 0)):
            del port["nodePort"]


def prepare_update(old: Obj, new: Obj) -> None:
    """Before validation: a node port left out keeps the old one (matched by port name)
    while both types use node ports; a change to a type without node ports clears those
    the update did not change (they are freed once it is stored)."""
    old_spec, spec = old.get("spec") or {}, new.setdefault("spec", {})
    _drop_unset(spec)
    old_type = dict(old_spec, type=old_spec.get("type") or "ClusterIP")
    new_type = dict(spec, type=spec.get("type") or "ClusterIP")
    old_ports, new_ports = set(node_ports_of(old)), set(node_ports_of(new))
    if needs_node_ports(old_type) and needs_node_ports(new_type):
        used = old_ports & new_ports
        by_name = {str(p.get("name") or ""): _node_port(p) for p in _ports(old_spec)}
        for port in _ports(spec):
            kept = by_name.get(str(port.get("name") or ""), 0)
            if not _node_port(port) and kept and kept not in used:
                port["nodePort"] = kept
    elif needs_node_ports(old_type) and new_ports <= old_ports:
        for port in _ports(spec):
            port.pop("nodePort", None)


def _full() -> ApiError:
    return ApiError(Reason.INTERNAL_ERROR, "Internal error occurred: failed to allocate a "
                                           "nodePort: range is full")


class _Operation:
    """The node ports one write holds: claimed in etcd as it goes (or, for a dry run,
    only checked), so a failed write gives back exactly what it took."""

    def __init__(self, ports: NodePorts, service: Obj, *, dry_run: bool) -> None:
        self.ports, self.service, self.dry_run = ports, service, dry_run
        self.held: list[int] = []
        self._taken: set[int] | None = None

    async def allocate(self, index: int, number: int) -> None:
        """Hold the node port the user named, or 422 on `spec.ports[index].nodePort`."""
        problem = None
        if number not in self.ports.range:
            problem = ("provided port is not in the valid range. The range of valid ports "
                       f"is {self.ports.range}")
        elif number in self.held or not await self._claim(number):
            problem = "provided port is already allocated"
        if problem is not None:
            raise holds.invalid_service(self.service, [invalid(
                f"spec.ports[{index}].nodePort", number, problem)])

    async def allocate_next(self) -> int:
        """Hold a free node port picked at random, the upper part of the range first."""
        span = self.ports.range
        # Another request (or apiserver) may take the port we picked: pick again. Every
        # lost race means a port was taken, so this ends once the range is full.
        for _ in range(span.size + 8):
            taken = await self._allocated()
            candidate = _pick(span, taken)
            if candidate is None:
                break
            if await self._claim(candidate):
                return candidate
            self._taken = None
        raise _full()

    async def _allocated(self) -> set[int]:
        if self._taken is None:
            self._taken = await self.ports.allocated()
        return self._taken | set(self.held)

    async def _claim(self, number: int) -> bool:
        if self.dry_run:
            if number in await self._allocated():
                return False
        elif not await self.ports.claim(number, self.service):
            return False
        self.held.append(number)
        return True


def _pick(span: PortRange, taken: set[int]) -> int | None:
    band = span.static_band
    for first, last in ((span.base + band, span.last), (span.base, span.base + band - 1)):
        free_count = (last - first + 1) - sum(1 for p in taken if first <= p <= last)
        if last < first or free_count <= 0:
            continue
        for _ in range(64):
            candidate = random.randint(first, last)
            if candidate not in taken:
                return candidate
        return next(p for p in range(first, last + 1) if p not in taken)
    return None


class NodePorts:
    """The allocator: one etcd key per node port, created with a compare-and-swap."""

    def __init__(self, storage: Storage, port_range: str = DEFAULT_NODE_PORT_RANGE
                 ) -> None:
        self.storage = storage
        self.range = PortRange.parse(port_range)

    def _key(self, number: int) -> str:
        return f"{NODE_PORT_PREFIX}{number}"

    async def allocated(self) -> set[int]:
        return {int(n) for n in await holds.held(self.storage, NODE_PORT_PREFIX)
                if n.isdigit()}

    async def claim(self, number: int, service: Obj) -> bool:
        return await holds.claim(self.storage, self._key(number), "ServiceNodePort", service)

    async def allocate(self, service: Obj, *, dry_run: bool = False) -> list[int]:
        """Fill in the node ports of a Service being created and hold them in etcd
        (unless `dry_run`); returns the ports held (for `release` if storing fails)."""
        spec = service.setdefault("spec", {})
        _drop_unset(spec)
        if not needs_node_ports(spec):
            return []
        op = _Operation(self, service, dry_run=dry_run)
        try:
            await self._fill_on_create(op, spec)
        except BaseException:
            await self._give_back(op)
            raise
        return [] if dry_run else op.held

    async def _fill_on_create(self, op: _Operation, spec: Obj) -> None:
        ports = _ports(spec)
        by_port: dict[Any, int] = {}
        for i, port in enumerate(ports):
            number = _node_port(port)
            if not number and not _allocates(spec):
                continue  # none asked for: respect only the ports the user named
            shared = by_port.get(port.get("port"), 0)
            if not shared:
                wanted = next((_node_port(p) for p in ports[i:]
                               if p.get("port") == port.get("port") and _node_port(p)), 0)
                if wanted:
                    await op.allocate(i, wanted)
                    shared = wanted
                else:
                    shared = await op.allocate_next()
                port["nodePort"] = by_port[port.get("port")] = shared
            elif number != shared:
                if not number:
                    port["nodePort"] = shared
                else:
                    await op.allocate(i, number)

    async def allocate_update(self, old: Obj, new: Obj, *, dry_run: bool = False
                              ) -> tuple[list[int], list[int]]:
        """Hold the node ports an update adds (after `prepare_update` and validation);
        returns (held now: `release` them if storing fails, to free once it is stored)."""
        spec = new.setdefault("spec", {})
        old_numbers = node_ports_of(old)
        op = _Operation(self, new, dry_run=dry_run)
        try:
            for i, port in enumerate(_ports(spec) if needs_node_ports(spec) else []):
                number = _node_port(port)
                if not number and not _allocates(spec):
                    continue
                if not number:
                    port["nodePort"] = await op.allocate_next()
                elif number not in old_numbers and number not in op.held:
                    await op.allocate(i, number)
        except BaseException:
            await self._give_back(op)
            raise
        if dry_run:
            return [], []
        kept = set(node_ports_of(new))  # prepare_update cleared them for a ClusterIP type
        return op.held, [n for n in old_numbers if n not in kept]

    async def _give_back(self, op: _Operation) -> None:
        if not op.dry_run:
            await self.release(op.held)

    async def release(self, numbers: list[int]) -> None:
        for number in numbers:
            await holds.release(self.storage, self._key(number))

    async def release_service(self, service: Obj) -> None:
        """Free the node ports a deleted Service held (those its uid holds)."""
        for number in node_ports_of(service):
            await holds.release_held(self.storage, self._key(number), service)


class NodePortRepair(HoldRepair):
    """Frees node ports no Service lists any more (Kubernetes' node port repair loop)."""

    prefix = NODE_PORT_PREFIX
    what = "node ports"

    def in_use(self, services: list[Obj]) -> set[tuple[str, str]]:
        return {(str((s.get("metadata") or {}).get("uid", "")), str(n)) for s in services
                for n in node_ports_of(s)}
