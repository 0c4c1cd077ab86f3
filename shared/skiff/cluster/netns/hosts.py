"""The hosts of a `skiff up --netns` cluster: one network namespace each, on one bridge.

Every component host (etcd, apiserver, scheduler, controller-manager, node-1..N) is a
network namespace `skiff-<id>-<host>` with loopback up and one veth, `eth0`, whose peer is a
port of the bridge `br0`. The bridge lives in a namespace of its own, `skiff-<id>-net`, so
nothing of the root namespace (its interfaces, routes, firewall) is touched. Hosts get
addresses in the private 10.231.0.0/24, which exists only inside this cluster's namespaces
(parallel clusters each have their own bridge, so they may reuse it; `<id>` keeps their
namespace names apart). `Network.to_json()` is cluster.json's `netns` section.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from skiff.cluster.netns.commands import NetnsError, namespace_name, run, table_name
from skiff.cluster.state import ClusterState

SUBNET = "10.231.0"
PREFIX_LEN = 24
CONTROL_PLANE_HOST = "control-plane"  # the host of the control-plane node agent
# Host addresses: control plane from .10, nodes from .101.
FIXED_HOSTS = {"etcd": 10, "apiserver": 11, "scheduler": 12, "controller-manager": 13,
               "controller-manager-2": 14, CONTROL_PLANE_HOST: 15,
               # `skiff up --ha --netns`: every replica on its own host.
               "etcd-1": 21, "etcd-2": 22, "etcd-3": 23, "apiserver-1": 31, "apiserver-2": 32,
               "scheduler-1": 41, "scheduler-2": 42, "controller-manager-1": 51}
NODE_BASE = 100


@dataclass
class Host:
    name: str
    netns: str
    ip: str
    port: str  # the bridge-side veth, in the bridge namespace


@dataclass
class Network:
    """The cluster's namespaces; its `to_json()` is cluster.json's `netns` section."""

    cluster_id: str
    bridge_netns: str
    hosts: dict[str, Host] = field(default_factory=dict)

    @classmethod
    def new(cls) -> Network:
        cluster_id = uuid.uuid4().hex[:6]
        return cls(cluster_id, namespace_name(cluster_id, "net"))

    @property
    def table(self) -> str:
        return table_name(self.cluster_id)

    def namespaces(self) -> list[str]:
        return [h.netns for h in self.hosts.values()] + [self.bridge_netns]

    def add_host(self, name: str) -> Host:
        if name in self.hosts:
            return self.hosts[name]
        if name in FIXED_HOSTS:
            octet = FIXED_HOSTS[name]
        elif name.startswith("node-") and name[5:].isdigit():
            octet = NODE_BASE + int(name[5:])
        else:
            raise NetnsError(f"no address plan for host {name!r}")
        if octet > 254:
            raise NetnsError(f"too many nodes for {SUBNET}.0/{PREFIX_LEN}")
        host = Host(name, namespace_name(self.cluster_id, name), f"{SUBNET}.{octet}",
                    f"v{octet}")
        _create_host(self.bridge_netns, host)
        self.hosts[name] = host
        return host

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise NetnsError(f"no host {name!r} in this cluster; hosts: "
                             f"{', '.join(self.hosts)}") from None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.cluster_id, "bridge": self.bridge_netns, "table": self.table,
                "subnet": f"{SUBNET}.0/{PREFIX_LEN}",
                "hosts": {h.name: {"netns": h.netns, "ip": h.ip, "port": h.port}
                          for h in self.hosts.values()}}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Network:
        topo = cls(str(raw["id"]), str(raw["bridge"]))
        for name, h in raw.get("hosts", {}).items():
            topo.hosts[name] = Host(name, h["netns"], h["ip"], h["port"])
        return topo


def create_bridge(bridge_netns: str) -> None:
    run("ip", "netns", "add", bridge_netns)
    run("ip", "-n", bridge_netns, "link", "set", "lo", "up")
    run("ip", "-n", bridge_netns, "link", "add", "br0", "type", "bridge")
    run("ip", "-n", bridge_netns, "link", "set", "br0", "up")


def _create_host(bridge_netns: str, host: Host) -> None:
    run("ip", "netns", "add", host.netns)
    # The veth is made in the bridge namespace and its peer moved straight into the host's:
    # it never exists in the root namespace.
    run("ip", "-n", bridge_netns, "link", "add", host.port, "type", "veth", "peer", "name",
         "eth0", "netns", host.netns)
    run("ip", "-n", bridge_netns, "link", "set", host.port, "master", "br0", "up")
    run("ip", "-n", host.netns, "addr", "add", f"{host.ip}/{PREFIX_LEN}", "dev", "eth0")
    run("ip", "-n", host.netns, "link", "set", "eth0", "up")
    run("ip", "-n", host.netns, "link", "set", "lo", "up")


def existing_namespaces() -> set[str]:
    out = run("ip", "netns", "list", check=False)
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def kill_namespace_processes(namespaces: list[str], *, timeout: float = 5.0) -> None:
    """SIGKILL every process still inside these namespaces (pods, stray services)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        present = existing_namespaces()
        for netns in namespaces:
            if netns in present:
                out = run("ip", "netns", "pids", netns, check=False)
                pids |= {int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()}
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def destroy(network: Network) -> list[str]:
    """Kill what runs in the cluster's namespaces and delete them (veths go with them)."""
    namespaces = network.namespaces()
    kill_namespace_processes(namespaces)
    present = existing_namespaces()
    removed = []
    for netns in namespaces:
        if netns in present:
            run("ip", "netns", "delete", netns, check=False)
            removed.append(netns)
    return removed


def is_netns_state(state: ClusterState | None) -> bool:
    return state is not None and bool(state.netns)


def network_of(state: ClusterState) -> Network:
    if not state.netns:
        raise NetnsError(f"the cluster in {state.data_dir} was not started with --netns")
    return Network.from_json(state.netns)
