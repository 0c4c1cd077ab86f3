"""Kind's node layout (kubelet `--pod-network=node`, SPEC JN1): each node's pod bridge in the
node's own network namespace, and one route per other Node's podCIDR via that Node's
InternalIP, kept in sync with the Node objects as kindnet keeps them.

Why: under `skiff up` every kubelet of a host shares one pod network namespace whose bridge
holds every node's gateway, so pods of different nodes meet on that bridge. Compose nodes
are containers, each with a network namespace of its own that no other node can share, so
each node bridges its own pods inside its container (`bind_node_netns` names the kubelet's
own network namespace as the pod network namespace, so the sandbox code and the service
proxy find the bridge, cluster IPs and DNS there, unchanged) and traffic for another node's
pods leaves through the container's interface to that node's address:

    node-1 container netns (its eth0 on the compose network, ip_forward on)
      bridge skiff0 10.244.1.1/24 ─ veths of node-1's pods
      10.244.2.0/24 via <node-2's InternalIP>   (this module; proto 83)
      10.244.3.0/24 via <node-3's InternalIP>

`NodeRoutes.run()` watches Nodes and re-checks the kernel every `resync` seconds: a route
the kernel dropped (the interface went with a `docker network disconnect` and came back)
is added again, a route whose Node is gone or changed is removed or replaced. Only routes
marked with this module's protocol number are ever touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from pyroute2 import IPRoute, NetlinkError, netns

from skiff.api.types import Obj, ObjView
from skiff.client import ApiClient
from skiff.client.informer import Informer
from skiff.kubelet.sandbox.linux import umount
from skiff.kubelet.sandbox.network import NETNS_DIR, _is_netns

__all__ = ["ROUTE_PROTOCOL", "NodeRoutes", "RoutePlan", "bind_node_netns", "desired_routes",
           "plan_routes"]

log = logging.getLogger(__name__)

# The rtnetlink protocol number marking this controller's routes (`ip route` shows
# "proto 83"); user-defined numbers start above RTPROT_STATIC (4).
ROUTE_PROTOCOL = 83
MAIN_TABLE = 254


def bind_node_netns(name: str) -> None:
    """Make /run/netns/`name` the kubelet's own network namespace (the node's), so the pod
    network namespace of the sandbox code is the node's. An entry from before (a restarted
    container keeps its files, not its mounts) is replaced unless it already is ours."""
    path = NETNS_DIR / name
    own = os.stat("/proc/self/ns/net").st_ino
    if _is_netns(path) and path.stat().st_ino == own:
        return
    if path.exists() or path.is_symlink():
        with contextlib.suppress(OSError):
            umount(str(path))
        path.unlink(missing_ok=True)
    netns.attach(name, os.getpid())


def _internal_ip(node: ObjView) -> str | None:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return str(address["address"])
    return None


def _pod_cidr(node: ObjView) -> str | None:
    spec = node.get("spec") or {}
    cidr = spec.get("podCIDR") or next(iter(spec.get("podCIDRs") or []), None)
    return str(cidr) if cidr else None


def desired_routes(nodes: Iterable[ObjView], *, own: str) -> dict[str, str]:
    """podCIDR → gateway (InternalIP) for every Node but `own` that has both, IPv4 only.
    A podCIDR or address that does not parse, or a podCIDR that overlaps `own`'s, is left
    out: the routes are the nodes', never a hijack of this node's own pods."""
    nodes = list(nodes)
    mine = next((_pod_cidr(n) for n in nodes if n["metadata"]["name"] == own), None)
    own_net = None
    with contextlib.suppress(ValueError, TypeError):
        own_net = ipaddress.IPv4Network(mine or "", strict=False) if mine else None
    out: dict[str, str] = {}
    for node in nodes:
        if node["metadata"]["name"] == own:
            continue
        cidr, gateway = _pod_cidr(node), _internal_ip(node)
        if not cidr or not gateway:
            continue
        try:
            net = ipaddress.IPv4Network(cidr, strict=False)
            via = ipaddress.IPv4Address(gateway)
        except ValueError:
            continue
        if (own_net is not None and net.overlaps(own_net)) or via.is_loopback:
            continue
        out[str(net)] = str(via)
    return out


@dataclass(frozen=True)
class RoutePlan:
    """What to change: routes to add or replace (dst → gateway), and dsts to delete."""

    replace: dict[str, str]
    delete: list[str]


def plan_routes(present: dict[str, str], wanted: dict[str, str]) -> RoutePlan:
    return RoutePlan(replace={dst: gw for dst, gw in wanted.items() if present.get(dst) != gw},
                     delete=sorted(dst for dst in present if dst not in wanted))


def _present(ipr: IPRoute) -> dict[str, str]:
    """This controller's routes in the main table now: dst → gateway."""
    out: dict[str, str] = {}
    for route in ipr.get_routes(family=socket.AF_INET, table=MAIN_TABLE):
        if route["proto"] != ROUTE_PROTOCOL:
            continue
        dst = route.get_attr("RTA_DST")
        if dst:
            out[f"{dst}/{route['dst_len']}"] = str(route.get_attr("RTA_GATEWAY") or "")
    return out


def apply_routes(wanted: dict[str, str]) -> RoutePlan:
    """Make the kernel's routes (of ROUTE_PROTOCOL) the wanted ones; returns what changed.
    A gateway that is not reachable now (the node's interface is gone: partitioned) is
    skipped and tried again at the next sync."""
    with IPRoute() as ipr:
        plan = plan_routes(_present(ipr), wanted)
        done: dict[str, str] = {}
        for dst, gateway in plan.replace.items():
            try:
                ipr.route("replace", dst=dst, gateway=gateway, proto=ROUTE_PROTOCOL,
                          table=MAIN_TABLE)
                done[dst] = gateway
            except NetlinkError as err:
                log.debug("node route not added", extra={"dst": dst, "gateway": gateway,
                                                         "error": str(err)})
        for dst in plan.delete:
            with contextlib.suppress(NetlinkError):  # gone with its interface meanwhile
                ipr.route("del", dst=dst, proto=ROUTE_PROTOCOL, table=MAIN_TABLE)
    return RoutePlan(replace=done, delete=plan.delete)


class NodeRoutes:
    """`run()` until cancelled: one route per other Node's podCIDR via its InternalIP."""

    def __init__(self, api: ApiClient, *, node_name: str, resync: float = 2.0) -> None:
        self.node_name = node_name
        self.resync = resync
        self.nodes = Informer(api, "nodes")
        self._dirty = asyncio.Event()

    async def run(self) -> None:
        def mark(*_objs: Obj) -> None:
            self._dirty.set()
        self.nodes.add_handler(on_add=mark, on_update=mark, on_delete=mark)
        informer = asyncio.create_task(self.nodes.run(), name="noderoutes-nodes")
        try:
            await self.nodes.wait_synced()
            while True:
                self._dirty.clear()
                await self.sync()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.resync):  # see skiff.tasks
                        await self._dirty.wait()
        finally:
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)

    async def sync(self) -> RoutePlan:
        wanted = desired_routes(self.nodes.store.list(), own=self.node_name)
        try:
            changed = await asyncio.to_thread(apply_routes, wanted)
        except (OSError, NetlinkError) as err:
            log.warning("node routes not synced; retrying", extra={"error": str(err)})
            return RoutePlan(replace={}, delete=[])
        if changed.replace or changed.delete:
            log.info("node routes synced", extra={"added": changed.replace,
                                                  "removed": changed.delete})
        return changed
