"""The pod network, with netlink (pyroute2) only: a bridge inside a Skiff-made namespace.

Layout (one per cluster, shared by every node's kubelet):

    netns <pod-network>:  bridge skiff0 (gateway .1 of every node's podCIDR, forwarding on)
        └─ veth sk<uid>  ⇄  eth0 in netns skiff-pod-<uid> (the pod's IP/prefix, default
                              route via its node's gateway; lo up)

Addresses are handed out like CNI's host-local IPAM: one file per address under
`<root>/ipam/<podCIDR>/`, created exclusively, so a restarted kubelet keeps its pods' IPs.

Setting a pod up is idempotent whatever a crash left behind (a killed kubelet, a power
cycle): a namespace, veth or address from before is reused when it is whole, and removed
and made again when it is not. The /run/netns entry of a pod outlives the bind mount that
held it when the kubelet ran in a mount namespace of its own (`ip netns exec`, as in
`skiff up --netns`) and that namespace died with it: such an entry is re-bound to the
namespace of a pod process that survived, or replaced by a fresh namespace.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pyroute2 import IPRoute, NetlinkError, netns

from skiff.kubelet.sandbox.linux import CLONE_NEWNET, setns_path, unshare

T = TypeVar("T")

__all__ = ["PodNetwork", "pod_netns_name", "reuseport_socket", "veth_name"]

BRIDGE = "skiff0"
NETNS_DIR = Path("/run/netns")


def pod_netns_name(uid: str) -> str:
    return f"skiff-pod-{uid}"


def veth_name(uid: str) -> str:
    """The bridge side of a pod's veth (interface names are at most 15 bytes)."""
    return "sk" + uid.replace("-", "")[:12]


def _on_thread(fn: Callable[[], T], *, join: str | None = None, new: str | None = None) -> T:
    """Run `fn()` on a fresh thread that first joins netns `join` (setns is per thread),
    or makes a new network namespace and binds it at /run/netns/`new`. pyroute2's own
    netns helpers fork a child, which is unsafe in a process with gRPC's threads."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            if join is not None:
                setns_path(str(NETNS_DIR / join), CLONE_NEWNET)
            if new is not None:
                unshare(CLONE_NEWNET)
                netns.attach(new, f"self/task/{threading.get_native_id()}")
            result.append(fn())
        except BaseException as err:  # handed back to the caller
            failure.append(err)

    thread = threading.Thread(target=run, name=f"netns:{join or new}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def reuseport_socket(kind: socket.SocketKind, address: str, port: int) -> socket.socket:
    """A non-blocking socket bound to address:port with SO_REUSEPORT (listening, when a
    stream), so every kubelet sharing the pod network namespace serves that address."""
    sock = socket.socket(socket.AF_INET, kind)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((address, port))
        if kind == socket.SOCK_STREAM:
            sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _in_netns(name: str, fn: Callable[[IPRoute], T]) -> T:
    """`fn(ipr)` with a netlink socket inside netns `name`."""
    def run() -> T:
        with IPRoute() as ipr:
            return fn(ipr)
    return _on_thread(run, join=name)


def _is_netns(path: Path) -> bool:
    """Whether `path` holds a network namespace (a bind mount of an nsfs inode), not the
    empty file a dead mount namespace left behind."""
    try:
        return path.stat().st_dev == os.stat("/proc/self/ns/net").st_dev
    except OSError:
        return False


def _net_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _create_netns(name: str, *, holders: Sequence[int] = ()) -> None:
    """Make a pod's netns `name` unless it exists. An entry whose mount is gone is
    replaced: bound again to the namespace of a surviving process in `holders` (its pod is
    still running there), else by a new namespace. Only the pod's own kubelet ever makes
    this entry, so an entry without a mount is never one being made by someone else."""
    path = NETNS_DIR / name
    if _is_netns(path):
        return
    if path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)  # an empty mount point of a dead mount namespace
    own = _net_inode("/proc/self/ns/net")
    for pid in holders:
        inode = _net_inode(f"/proc/{pid}/ns/net")
        if inode is not None and inode != own:  # in a namespace of its own: the pod's
            with contextlib.suppress(OSError):
                netns.attach(name, str(pid))
                if _is_netns(path):
                    return
            path.unlink(missing_ok=True)
    _on_thread(lambda: None, new=name)


def _netlink_failure(err: NetlinkError) -> OSError:
    """A netlink error as the OSError callers handle (a sandbox error, retried)."""
    code = int(err.code or errno.EIO)
    return OSError(code, os.strerror(code))


def _write_sysctl(path: str, value: str) -> None:
    """Set a sysctl unless it already has `value` (a node container gets ip_forward from
    its engine, with /proc/sys read-only)."""
    with open(path) as f:
        if f.read().strip() == value:
            return
    with open(path, "w") as f:
        f.write(value)


class PodNetwork:
    """Creates and removes pod network namespaces and their links on the shared bridge."""

    def __init__(self, *, namespace: str, ipam_dir: Path) -> None:
        self.namespace = namespace
        self.ipam_dir = ipam_dir

    # -- the shared bridge namespace ---------------------------------------------------------

    def ensure_bridge(self, pod_cidr: str) -> str:
        """Create the pod network namespace and bridge if needed; returns the gateway of
        `pod_cidr` (its first address), which the bridge holds."""
        net = ipaddress.ip_network(pod_cidr, strict=False)
        gateway = str(net.network_address + 1)
        if self.namespace not in netns.listnetns():
            with contextlib.suppress(OSError):  # another kubelet made it meanwhile
                _on_thread(lambda: None, new=self.namespace)
        # it routes between the nodes' podCIDRs (also when --netns made the namespace)
        _on_thread(lambda: _write_sysctl("/proc/sys/net/ipv4/ip_forward", "1"),
                   join=self.namespace)

        def bridge(ns: IPRoute) -> None:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
            if not ns.link_lookup(ifname=BRIDGE):
                with contextlib.suppress(NetlinkError):
                    ns.link("add", ifname=BRIDGE, kind="bridge")
            index = ns.link_lookup(ifname=BRIDGE)[0]
            with contextlib.suppress(NetlinkError):  # EEXIST: another node added it
                ns.addr("add", index=index, address=gateway, prefixlen=net.prefixlen)
            ns.link("set", index=index, state="up")

        _in_netns(self.namespace, bridge)
        return gateway

    # -- IPAM ------------------------------------------------------------------------------

    def _pool(self, pod_cidr: str) -> Path:
        return self.ipam_dir / pod_cidr.replace("/", "_")

    def allocate(self, pod_cidr: str, uid: str) -> str:
        pool = self._pool(pod_cidr)
        pool.mkdir(parents=True, exist_ok=True)
        for entry in pool.iterdir():  # already holds one (a kubelet restart)
            if entry.read_text() == uid:
                return entry.name
        net = ipaddress.ip_network(pod_cidr, strict=False)
        for host in list(net.hosts())[1:]:  # the first address is the gateway
            try:
                fd = os.open(pool / str(host), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(uid)
            return str(host)
        raise OSError(errno.ENOSPC, f"no free address left in the node's podCIDR {pod_cidr}")

    def release(self, uid: str) -> None:
        if not self.ipam_dir.is_dir():
            return
        for pool in self.ipam_dir.iterdir():
            for entry in pool.iterdir():
                with contextlib.suppress(OSError):
                    if entry.read_text() == uid:
                        entry.unlink()

    # -- one pod ---------------------------------------------------------------------------

    def setup_pod(self, uid: str, pod_cidr: str, *, holders: Sequence[int] = ()) -> str:
        """The pod's namespace, veth and address; returns the pod IP. Idempotent, also over
        what a crash left (module docstring); `holders` are PIDs of the pod's processes
        that survived a kubelet restart, whose network namespace is the pod's."""
        try:
            return self._setup_pod(uid, pod_cidr, holders)
        except NetlinkError as err:
            raise _netlink_failure(err) from None

    def _setup_pod(self, uid: str, pod_cidr: str, holders: Sequence[int]) -> str:
        gateway = self.ensure_bridge(pod_cidr)
        ip = self.allocate(pod_cidr, uid)
        prefix = ipaddress.ip_network(pod_cidr, strict=False).prefixlen
        name = pod_netns_name(uid)
        _create_netns(name, holders=holders)
        host_side = veth_name(uid)

        def pod_side(pod: IPRoute) -> list[int]:
            return list(pod.link_lookup(ifname="eth0"))

        def host_sides(ns: IPRoute) -> list[int]:
            return list(ns.link_lookup(ifname=host_side))

        def delete(indexes: list[int]) -> Callable[[IPRoute], None]:
            def run(ipr: IPRoute) -> None:
                for index in indexes:  # a veth's peer goes with it
                    with contextlib.suppress(NetlinkError):  # ENODEV: went with its peer
                        ipr.link("del", index=index)
            return run

        inside, outside = _in_netns(name, pod_side), _in_netns(self.namespace, host_sides)
        if not (inside and outside):
            # Half a pair (one end went with an earlier namespace, or a setup was cut
            # short): remove what is left and make the pair again.
            _in_netns(name, delete(inside))
            _in_netns(self.namespace, delete(outside))

        def veth(ns: IPRoute) -> None:
            if not ns.link_lookup(ifname=host_side):
                fd = os.open(NETNS_DIR / name, os.O_RDONLY)
                try:
                    ns.link("add", ifname=host_side, kind="veth",
                            peer={"ifname": "eth0", "net_ns_fd": fd})
                finally:
                    os.close(fd)
            ns.link("set", index=ns.link_lookup(ifname=host_side)[0],
                    master=ns.link_lookup(ifname=BRIDGE)[0], state="up")

        def address(pod: IPRoute) -> None:
            pod.link("set", index=pod.link_lookup(ifname="lo")[0], state="up")
            eth0 = pod.link_lookup(ifname="eth0")[0]
            present = False
            for entry in pod.get_addr(index=eth0, family=socket.AF_INET):
                if entry.get_attr("IFA_ADDRESS") == ip and entry["prefixlen"] == prefix:
                    present = True
                else:  # an address from before that is not the pod's any more
                    pod.addr("del", index=eth0, address=entry.get_attr("IFA_ADDRESS"),
                             prefixlen=entry["prefixlen"])
            if not present:
                pod.addr("add", index=eth0, address=ip, prefixlen=prefix)
            pod.link("set", index=eth0, state="up")
            pod.route("replace", dst="0.0.0.0/0", gateway=gateway)

        _in_netns(self.namespace, veth)
        _in_netns(name, address)
        return ip

    def teardown_pod(self, uid: str) -> None:
        """Remove the pod's namespace (its eth0 and so the veth pair go with it) and IP."""
        name = pod_netns_name(uid)
        if name in netns.listnetns():
            with contextlib.suppress(OSError):
                netns.remove(name)
        if self.namespace in netns.listnetns():
            def unlink(ns: IPRoute) -> None:
                for index in ns.link_lookup(ifname=veth_name(uid)):
                    with contextlib.suppress(NetlinkError):
                        ns.link("del", index=index)
            _in_netns(self.namespace, unlink)
        self.release(uid)
