"""The kubelet's sandbox manager: one `Sandbox` per pod, made before its first container.

`Sandbox.enter()` runs in each container's child process before exec: it joins the pod's
network namespace, gives the process a UTS namespace whose hostname is the pod's, builds
the container's own root filesystem (`rootfs`) and becomes the container's user with its
capabilities (`security`), confined by Landlock to that root (`landlock`).
`Sandbox.join(pid)` puts an exec'd command (probes, hooks, `kubectl exec`) into a running
container's namespaces, root, Landlock confinement and identity. A sandbox goes once the pod's last
process is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.client import Client
from skiff.kubelet.sandbox.landlock import LandlockPlan, confine
from skiff.kubelet.sandbox.linux import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    setns_path,
    unshare,
)
from skiff.kubelet.sandbox.network import NETNS_DIR, PodNetwork, pod_netns_name
from skiff.kubelet.sandbox.rootfs import RootView, build_root
from skiff.kubelet.sandbox.security import SecurityPlan

__all__ = ["NOT_ISOLATED_MESSAGE", "NO_POD_CIDR_MESSAGE", "Sandbox", "SandboxError",
           "SandboxManager", "sandbox_supported"]

NO_POD_CIDR_MESSAGE = (
    "Node {node} has no spec.podCIDR (the controller-manager's nodeipam controller assigns "
    "one): this pod shares the node's network (pod IP 127.0.0.1, ports collide between "
    "pods), hostname and mount namespace")
NOT_ISOLATED_MESSAGE = (
    "pod sandboxes are off (not root with CAP_SYS_ADMIN and CAP_NET_ADMIN, e.g. in an "
    "unprivileged container, or --sandbox=none): this pod shares the node's "
    "network (pod IP 127.0.0.1, ports collide between pods), hostname and mount namespace")


class SandboxError(Exception):
    """The sandbox cannot be made yet (e.g. the node has no podCIDR)."""


# Making and joining namespaces needs CAP_SYS_ADMIN, links and addresses CAP_NET_ADMIN.
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
SANDBOX_CAPABILITIES = (1 << CAP_NET_ADMIN) | (1 << CAP_SYS_ADMIN)


def effective_capabilities(status: str = "/proc/self/status") -> int:
    """The process's effective capability set (0 when it cannot be read)."""
    try:
        with open(status) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def sandbox_supported(mode: str) -> bool:
    """`--sandbox`: `auto` sandboxes pods when running as root with the capabilities that
    namespaces and links need, `none` never does. Root alone is not enough: root in an
    unprivileged container (the compose cluster's nodes) has neither CAP_SYS_ADMIN nor
    CAP_NET_ADMIN, and every pod would wait in ContainerCreating for a sandbox that can
    never be made."""
    if mode == "none" or os.geteuid() != 0:
        return False
    return effective_capabilities() & SANDBOX_CAPABILITIES == SANDBOX_CAPABILITIES


def pod_hostname(pod: Obj) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("hostname") or pod["metadata"]["name"])[:63]


@dataclass(frozen=True)
class Sandbox:
    """The pod's sandbox as one container enters it: `root` and `security` are that
    container's."""

    uid: str
    ip: str
    hostname: str
    root: RootView | None = None
    security: SecurityPlan | None = None
    # `hostNetwork: true`: the node's network and hostname, but still its own root (AU8)
    host_network: bool = False
    # AU8: the Landlock domain confining the container to its own root (None: no Landlock)
    landlock: LandlockPlan | None = None

    @property
    def netns_path(self) -> str:
        if self.host_network:
            return f"/proc/{os.getpid()}/ns/net"  # the kubelet's (the node's) network
        return str(NETNS_DIR / pod_netns_name(self.uid))

    def enter(self) -> None:
        """Join the pod's namespaces, make the container's root, become its user (called in
        a forked child before exec)."""
        if not self.host_network:
            setns_path(self.netns_path, CLONE_NEWNET)
            unshare(CLONE_NEWUTS)
            socket.sethostname(self.hostname)
        if self.root is not None:
            build_root(self.root)
            if self.landlock is not None:  # still root with CAP_SYS_ADMIN
                confine(self.landlock)
        if self.security is not None:
            self.security.apply()

    def join(self, pid: int) -> None:
        """Enter running container `pid`: its network, hostname, root filesystem (setns
        of a mount namespace makes its root ours) and working directory, then its user."""
        setns_path(f"/proc/{pid}/ns/net", CLONE_NEWNET)
        setns_path(f"/proc/{pid}/ns/uts", CLONE_NEWUTS)
        setns_path(f"/proc/{pid}/ns/mnt", CLONE_NEWNS)
        if self.root is not None:
            os.chdir(self.root.working_dir)
            if self.landlock is not None:  # a domain of its own, confined like the container
                confine(self.landlock)
        if self.security is not None:
            self.security.apply()

    def for_container(self, *, root: RootView | None, security: SecurityPlan | None,
                      landlock: LandlockPlan | None = None) -> Sandbox:
        return dataclasses.replace(self, root=root, security=security, landlock=landlock)

    def socket(self) -> socket.socket:
        """A non-blocking TCP socket that lives in the pod's network namespace (made on a
        thread that joins it: setns is per thread, a socket keeps its namespace)."""
        made: list[socket.socket] = []

        def make() -> None:
            setns_path(self.netns_path, CLONE_NEWNET)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            made.append(sock)

        thread = threading.Thread(target=make, name=f"sandbox:{self.uid}")
        thread.start()
        thread.join()
        if not made:
            raise OSError(f"cannot enter the pod's network namespace {self.netns_path}")
        return made[0]


class SandboxManager:
    def __init__(self, *, api: Client, node_name: str, network: PodNetwork,
                 pod_cidr_wait: float = 0.0) -> None:
        self.api = api
        self.node_name = node_name
        self.network = network
        # `skiff up` runs the nodeipam controller: a pod that comes before the Node's
        # podCIDR waits for it (as a real node's pods wait for its CNI) instead of
        # running without a sandbox; a cluster without node IPAM stops waiting after this.
        self.pod_cidr_deadline = time.monotonic() + pod_cidr_wait

    async def pod_cidr(self) -> str | None:
        try:
            node = await self.api.get("nodes", self.node_name)
        except ApiError as err:
            raise SandboxError(f"cannot read Node {self.node_name}: {err.message}") from None
        spec = node.get("spec") or {}
        cidr = spec.get("podCIDR") or next(iter(spec.get("podCIDRs") or []), None)
        return str(cidr) if cidr else None

    async def ensure(self, pod: Obj, *, holders: Sequence[int] = ()) -> Sandbox | None:
        """The pod's sandbox, or None when the node has no podCIDR (no node IPAM runs:
        the pod shares the node's network, and the caller says so). `holders`: PIDs of the
        pod's processes a restarted kubelet re-adopted (their namespace is the pod's)."""
        uid = str(pod["metadata"]["uid"])
        cidr = await self.pod_cidr()
        if cidr is None:
            if time.monotonic() < self.pod_cidr_deadline:
                raise SandboxError(f"Node {self.node_name} has no spec.podCIDR yet; waiting "
                                   "for the controller-manager's nodeipam controller")
            return None
        try:
            ip = await asyncio.to_thread(self.network.setup_pod, uid, cidr,
                                         holders=holders)
        except OSError as err:
            raise SandboxError(f"cannot set up the pod's network: {err}") from None
        return Sandbox(uid=uid, ip=ip, hostname=pod_hostname(pod))

    async def remove(self, uid: str) -> None:
        await asyncio.to_thread(self.network.teardown_pod, uid)
