"""`skiff up --netns`: a cluster whose components sit on separate network "hosts", so
partitions are real network cuts (SPEC SC2) without Docker. Linux only, root only.

Topology. Every component host (etcd, apiserver, scheduler, controller-manager, node-1..N)
is a network namespace `skiff-<id>-<host>` with loopback up and one veth, `eth0`, whose
peer is a port of the bridge `br0`. The bridge lives in a namespace of its own,
`skiff-<id>-net`, so nothing of the root namespace (its interfaces, routes, firewall) is
touched. Hosts get addresses in the private 10.231.0.0/24, which exists only inside this
cluster's namespaces (parallel clusters each have their own bridge, so they may reuse it;
`<id>` keeps their namespace names apart). Processes start as `ip netns exec <ns> argv`
(ip execs without forking, so the PID and /proc cmdline are the service's own) and are
recorded in cluster.json like `skiff up` records them, with their namespace.

The published ports. The host (CLI, tests, the fence agent) reaches the cluster through
one gateway process in the root namespace: `python -m skiff.cli.netns gateway`. The
parent binds its listening sockets on 127.0.0.1 and hands them over as inherited file
descriptors (no port race); for each accepted connection the gateway opens the upstream
socket *inside* the target's namespace (setns(2) around socket(2); a socket stays in the
namespace it was created in) and connects to 127.0.0.1:<port> there. Published: the
apiserver's gRPC and HTTP ports, etcd's client port and every service's health port. The
upstream leg is the target namespace's loopback, which partitions never cut: the host is
the management network, not a cluster peer.

The fence agent runs in the root namespace: it is the out-of-band BMC (SPEC FN2). It talks
to the apiserver through the gateway, kills processes by PID and starts a node's kubelet
again inside the node's namespace (the recorded `netns`), so no partition reaches it.

Partitions (`partition`, `heal`): nftables rules in the cluster's own table
`inet skiff_<id>`, created inside the affected hosts' namespaces only. A cut between hosts
A and B drops, in A's input chain, everything from B's address and, in B's input chain,
everything from A's: both directions die at the receiver, so senders see a silent black
hole (connects hang, established streams stall), as on a real partition. Each rule carries
the comment `skiff-cut:<a>:<b>`; `heal` deletes exactly those rules by handle and the table
once it is empty.

Security (SPEC AU1-AU4) as in a plain `skiff up`: TLS and client certificates by default
(the serving certificates name every control-plane host's address, each kubelet's its
node's), components with their own identities (recorded with them, so restarts keep them),
a kubeconfig with the admin's certificate; `insecure=True` (`--insecure`) is plaintext.

`skiff down` stops the recorded processes, kills whatever still runs in the cluster's
namespaces (`ip netns pids`: pod processes), then deletes those namespaces, and only those.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skiff.cgroupfs import remove_recorded
from skiff.cli.config import ClusterConfig
from skiff.cli.controlplane.mirror import nodes_for
from skiff.cli.localcluster import (
    FENCE_AGENT_ANNOTATION,
    POD_CIDR_WAIT,
    STATE_FILE,
    ZONES,
    ClusterState,
    Component,
    pid_alive,
    service_available,
    stop_component,
    write_kubeconfig,
)
from skiff.cli.podgroups import end_pod_groups, kubelet_root_dirs, summary
from skiff.cli.processes import (
    EtcdTlsFiles,
    Process,
    StartError,
    find_etcd,
    free_port,
    python_module,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cli.sandboxes import remove_sandboxes
from skiff.cli.security import ClusterSecurity, cli_credentials, prepare
from skiff.client.credentials import Credentials

__all__ = ["NetnsCluster", "NetnsError", "destroy", "heal", "is_netns_state", "partition",
           "require_netns_support"]

SUBNET = "10.231.0"
PREFIX_LEN = 24
ETCD_PORT, ETCD_PEER_PORT = 2379, 2380
API_PORT, API_HTTP_PORT = 6443, 8080
HEALTH_PORT = 10256
CONTROL_PLANE_HOST = "control-plane"  # the host of the control-plane node agent
ENV = {"SKIFF_LOG_FORMAT": "json"}
CUT_COMMENT = "skiff-cut"
CLONE_NEWNET = 0x40000000
# Host addresses: control plane from .10, nodes from .101.
FIXED_HOSTS = {"etcd": 10, "apiserver": 11, "scheduler": 12, "controller-manager": 13,
               "controller-manager-2": 14, CONTROL_PLANE_HOST: 15,
               # `skiff up --ha --netns` (cli/topology.py): every replica on its own host.
               "etcd-1": 21, "etcd-2": 22, "etcd-3": 23, "apiserver-1": 31, "apiserver-2": 32,
               "scheduler-1": 41, "scheduler-2": 42, "controller-manager-1": 51}
NODE_BASE = 100


class NetnsError(StartError):
    """Namespaces or nftables could not be set up or changed; says what and why."""


# -- small wrappers ----------------------------------------------------------------------


def require_netns_support() -> None:
    """Root, `ip` and `nft`: the one clear error when any is missing."""
    if sys.platform != "linux":
        raise NetnsError("--netns needs Linux network namespaces")
    if os.geteuid() != 0:
        raise NetnsError("--netns creates network namespaces, veths and nftables rules and "
                         "needs root: run it as root (sudo), or use plain `skiff up`")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            raise NetnsError(f"--netns needs `{tool}`: install it with "
                             f"`apt-get install {package}`")


def _run(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                          timeout=30, check=False)
    if check and done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip() or
                  f"exit code {done.returncode}").splitlines()[-1]
        raise NetnsError(f"`{' '.join(argv)}` failed: {detail}")
    return done.stdout


def ns_exec(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def namespace_name(cluster_id: str, host: str) -> str:
    return f"skiff-{cluster_id}-{host}"


def table_name(cluster_id: str) -> str:
    return f"skiff_{cluster_id}"


# -- topology ----------------------------------------------------------------------------


@dataclass
class Host:
    name: str
    netns: str
    ip: str
    port: str  # the bridge-side veth, in the bridge namespace


@dataclass
class Topology:
    """The cluster's namespaces; its `to_json()` is cluster.json's `netns` section."""

    cluster_id: str
    bridge_netns: str
    hosts: dict[str, Host] = field(default_factory=dict)

    @classmethod
    def new(cls) -> Topology:
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
    def from_json(cls, raw: dict[str, Any]) -> Topology:
        topo = cls(str(raw["id"]), str(raw["bridge"]))
        for name, h in raw.get("hosts", {}).items():
            topo.hosts[name] = Host(name, h["netns"], h["ip"], h["port"])
        return topo


def _create_bridge(bridge_netns: str) -> None:
    _run("ip", "netns", "add", bridge_netns)
    _run("ip", "-n", bridge_netns, "link", "set", "lo", "up")
    _run("ip", "-n", bridge_netns, "link", "add", "br0", "type", "bridge")
    _run("ip", "-n", bridge_netns, "link", "set", "br0", "up")


def _create_host(bridge_netns: str, host: Host) -> None:
    _run("ip", "netns", "add", host.netns)
    # The veth is made in the bridge namespace and its peer moved straight into the host's:
    # it never exists in the root namespace.
    _run("ip", "-n", bridge_netns, "link", "add", host.port, "type", "veth", "peer", "name",
         "eth0", "netns", host.netns)
    _run("ip", "-n", bridge_netns, "link", "set", host.port, "master", "br0", "up")
    _run("ip", "-n", host.netns, "addr", "add", f"{host.ip}/{PREFIX_LEN}", "dev", "eth0")
    _run("ip", "-n", host.netns, "link", "set", "eth0", "up")
    _run("ip", "-n", host.netns, "link", "set", "lo", "up")


def existing_namespaces() -> set[str]:
    out = _run("ip", "netns", "list", check=False)
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def kill_namespace_processes(namespaces: list[str], *, timeout: float = 5.0) -> None:
    """SIGKILL every process still inside these namespaces (pods, stray services)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        present = existing_namespaces()
        for netns in namespaces:
            if netns in present:
                out = _run("ip", "netns", "pids", netns, check=False)
                pids |= {int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()}
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def destroy(topology: Topology) -> list[str]:
    """Kill what runs in the cluster's namespaces and delete them (veths go with them)."""
    namespaces = topology.namespaces()
    kill_namespace_processes(namespaces)
    present = existing_namespaces()
    removed = []
    for netns in namespaces:
        if netns in present:
            _run("ip", "netns", "delete", netns, check=False)
            removed.append(netns)
    return removed


# -- partitions --------------------------------------------------------------------------


def _nft(netns: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
    return _run("ip", "netns", "exec", netns, "nft", *args, stdin=stdin, check=check)


def _ensure_table(netns: str, table: str) -> None:
    _nft(netns, "-f", "-", stdin=(
        f"table inet {table} {{\n"
        f"  chain input {{ type filter hook input priority -10; policy accept; }}\n"
        f"}}\n"))


def _cut_rules(netns: str, table: str) -> list[tuple[int, str]]:
    """(handle, comment) of every cut rule in the table of `netns` ([] without a table)."""
    out = _nft(netns, "-j", "-a", "list", "table", "inet", table, check=False)
    if not out.strip():
        return []
    rules = []
    for item in json.loads(out).get("nftables", []):
        rule = item.get("rule")
        if rule and str(rule.get("comment", "")).startswith(CUT_COMMENT):
            rules.append((int(rule["handle"]), str(rule["comment"])))
    return rules


def _add_cut(topology: Topology, here: Host, peer: Host, comment: str) -> bool:
    if any(c == comment for _, c in _cut_rules(here.netns, topology.table)):
        return False
    _ensure_table(here.netns, topology.table)
    _nft(here.netns, "add", "rule", "inet", topology.table, "input", "ip", "saddr", peer.ip,
         "drop", "comment", f'"{comment}"')
    return True


def partition(topology: Topology, a: str, b: str | None = None) -> str:
    """Cut host `a` from host `b`, or from every other host of the cluster."""
    here = topology.host(a)
    # `--from etcd` in an --ha cluster: every replica (etcd-1, etcd-2, ...) but `a` itself.
    group = [h for n, h in topology.hosts.items()
             if b is not None and b not in topology.hosts and n != a and
             n.startswith(f"{b}-") and n[len(b) + 1:].isdigit()]
    peers = group or ([topology.host(b)] if b is not None else
                      [h for h in topology.hosts.values() if h.name != a])
    if b == a:
        raise NetnsError(f"cannot partition {a} from itself; name another component")
    added = 0
    for peer in peers:
        comment = f"{CUT_COMMENT}:{here.name}:{peer.name}"
        added += _add_cut(topology, here, peer, comment)
        added += _add_cut(topology, peer, here, comment)
    what = f"from {b}" if b is not None else "from every other host"
    if not added:
        return f"{a} was already partitioned {what}"
    return (f"partitioned {a} ({here.ip}) {what}: packets between them are dropped "
            f"(nft table inet {topology.table}); `skiff chaos heal {a}` ends it")


def heal(topology: Topology, a: str | None = None) -> str:
    """Delete every cut rule that involves host `a` (every cut rule when None)."""
    if a is not None:
        topology.host(a)
    removed = 0
    for host in topology.hosts.values():
        if host.netns not in existing_namespaces():
            continue
        rules = _cut_rules(host.netns, topology.table)
        for handle, comment in rules:
            ends = comment.split(":")[1:]
            if a is None or a in ends:
                _nft(host.netns, "delete", "rule", "inet", topology.table, "input",
                     "handle", str(handle))
                removed += 1
        if rules and not _cut_rules(host.netns, topology.table):
            _nft(host.netns, "delete", "table", "inet", topology.table, check=False)
    if not removed:
        return (f"nothing to heal: {a} is not partitioned" if a is not None else
                "nothing to heal: no host of this cluster is partitioned")
    return f"healed {a or 'every partition'}: removed {removed} drop rule(s)"


def is_netns_state(state: ClusterState | None) -> bool:
    return state is not None and bool(state.netns)


def topology_of(state: ClusterState) -> Topology:
    if not state.netns:
        raise NetnsError(f"the cluster in {state.data_dir} was not started with --netns")
    return Topology.from_json(state.netns)


def destroy_by_state(data_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """`skiff down` of a netns cluster: processes in reverse start order, then whatever
    still runs in its namespaces, then the namespaces."""
    state = ClusterState.load(data_dir)
    if state is None or not state.netns:
        raise NetnsError(f"no netns cluster state in {data_dir}")
    lines = []
    roots = kubelet_root_dirs(data_dir, [c.argv for c in state.components
                                         if c.name.startswith("kubelet-")])
    for comp in reversed(state.components):
        stop_component(comp, timeout=timeout)
        lines.append(f"{comp.name:<22} pid {comp.pid:<8} stopped")
    lines.append(summary(end_pod_groups(roots)))
    for netns in destroy(Topology.from_json(state.netns)):
        lines.append(f"{'netns':<22} {netns} deleted")
    remove_sandboxes(roots, "")  # the pods' namespaces the kubelets named (SB4)
    remove_recorded(roots)  # and their cgroups (AU8)
    with contextlib.suppress(OSError):
        (data_dir / STATE_FILE).unlink()
    return lines


# -- the gateway (published ports) -------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """Connections to the inherited listening socket `fd` go to 127.0.0.1:`port` inside
    the namespace `netns`."""

    fd: int
    netns: str
    port: int


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Gateway:
    """Forwards host connections into namespaces (see the module docstring)."""

    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.ns_fds: dict[str, int] = {}

    def _socket_in(self, netns: str) -> socket.socket:
        if netns not in self.ns_fds:
            self.ns_fds[netns] = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        _setns(self.ns_fds[netns])
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            _setns(self.home)
        sock.setblocking(False)
        return sock

    async def _handle(self, route: Route, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        upstream = self._socket_in(route.netns)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(
                upstream, ("127.0.0.1", route.port)), 5)
            up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        except (OSError, TimeoutError):
            upstream.close()
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def run(self) -> None:
        servers = []
        for route in self.routes:
            sock = socket.socket(fileno=route.fd)
            sock.setblocking(False)

            def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                        route: Route = route) -> Any:
                return self._handle(route, r, w)

            servers.append(await asyncio.start_server(handler, sock=sock))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for server in servers:
            server.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


def gateway_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m skiff.cli.netns gateway")
    parser.add_argument("--route", action="append", default=[],
                        help="FD:NETNS:PORT (an inherited listening socket)")
    args = parser.parse_args(argv)
    routes = []
    for spec in args.route:
        fd, netns, port = spec.split(":")
        routes.append(Route(int(fd), netns, int(port)))
    asyncio.run(Gateway(routes).run())


# -- the cluster -------------------------------------------------------------------------


@dataclass
class Published:
    name: str
    netns: str
    port: int
    sock: socket.socket
    address: str  # 127.0.0.1:<port> in the root namespace


@dataclass
class NetnsCluster:
    """Like `LocalCluster`, but each component on its own network host (module docstring).

    `extra_args` adds flags per service kind (apiserver, scheduler, controller-manager,
    kubelet, fence-agent); `node_annotations` overrides a node's annotations (default
    `skiff.io/fence-agent=power`); `controller_managers` = 2 runs a second instance on its
    own host (leader election decides which one acts).
    """

    data_dir: Path
    nodes: int = 3
    config: ClusterConfig = field(default_factory=ClusterConfig)
    extra_args: dict[str, list[str]] = field(default_factory=dict)
    node_annotations: dict[str, str] = field(default_factory=dict)
    controller_managers: int = 1
    fence_agent: bool = True
    insecure: bool = False  # `skiff up --netns --insecure`: the plaintext mode (warned)
    # `skiff up --netns`: the control-plane Node and mirror pods (cli/controlplane), from
    # an agent on a host of its own
    mirror_pods: bool = False
    security: ClusterSecurity = field(default_factory=lambda: ClusterSecurity(None))
    topology: Topology | None = None
    processes: list[Process] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    api: str = ""

    # -- start ---------------------------------------------------------------------------

    def start(self, *, echo: Any = print) -> ClusterState:
        require_netns_support()
        running = ClusterState.load(self.data_dir)
        if running and any(pid_alive(c.pid) for c in running.components):
            raise StartError(f"a cluster is already running from {self.data_dir} (API "
                             f"{running.api}); stop it with `skiff down` first")
        find_etcd()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.topology = topo = Topology.new()
        try:
            _create_bridge(topo.bridge_netns)
            for name in self._hosts() + ([CONTROL_PLANE_HOST] if self.mirror_pods else []):
                topo.add_host(name)
            self.save()  # from here on, `skiff down` can find and delete the namespaces
            self.security = self._prepare_security(echo)
            self._start_all(echo)
        except BaseException:
            self.stop()
            raise
        echo(f"{'netns':<22} {len(topo.hosts)} hosts on {SUBNET}.0/{PREFIX_LEN}, bridge "
             f"namespace {topo.bridge_netns}")
        if self.security.pki is not None:
            echo(f"{'credentials':<22} {'':<12} {self.security.pki.directory}   (CA, admin "
                 f"certificate in system:masters; files 0600)")
        return self.save()

    @property
    def admin(self) -> Credentials:
        """The admin's credentials (system:masters; none in the insecure mode)."""
        return self.security.credentials()

    def _hosts(self) -> list[str]:
        hosts = ["etcd", "apiserver", "scheduler", "controller-manager"]
        if self.controller_managers > 1:
            hosts.append("controller-manager-2")
        return hosts + [f"node-{i}" for i in range(1, self.nodes + 1)]

    def _prepare_security(self, echo: Any) -> ClusterSecurity:
        """The PKI, with every control-plane host's address in the serving certificates
        and each node's address in its kubelet's; or the announced insecure mode."""
        assert self.topology is not None
        hosts = self.topology.hosts
        nodes = {name: [h.ip] for name, h in hosts.items() if name.startswith("node-")}
        if CONTROL_PLANE_HOST in hosts:  # the agent's Nodes, for their log endpoints
            nodes.update({n: [hosts[CONTROL_PLANE_HOST].ip] for n in nodes_for(list(hosts))})
        return prepare(self.data_dir, insecure=self.insecure, nodes=list(nodes),
                       hosts=[h.ip for name, h in hosts.items() if name not in nodes],
                       node_hosts=nodes, echo=echo)

    def save(self) -> ClusterState:
        assert self.topology is not None
        state = ClusterState(api=self.api, data_dir=str(self.data_dir),
                             components=self.components, started=time.time(),
                             netns=self.topology.to_json())
        state.save(self.data_dir)
        return state

    def _publish(self, name: str, netns: str, port: int) -> Published:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        pub = Published(name, netns, port, sock, f"127.0.0.1:{sock.getsockname()[1]}")
        self.published.append(pub)
        return pub

    def _start_all(self, echo: Any) -> None:
        topo = self.topology
        assert topo is not None
        etcd_host, api_host = topo.host("etcd"), topo.host("apiserver")
        # The gateway first: every published socket exists before anything starts.
        etcd_pub = self._publish("etcd", etcd_host.netns, ETCD_PORT)
        api_pub = self._publish("apiserver", api_host.netns, API_PORT)
        http_pub = self._publish("apiserver-http", api_host.netns, API_HTTP_PORT)
        services = self._services()
        health_pubs = {name: self._publish(name, topo.host(host).netns, HEALTH_PORT)
                       for name, host, _, _ in services}
        self.api = api_pub.address
        self._start_gateway(api_pub.address, echo)
        scheme = self.security.scheme
        peer = f"{scheme}://{etcd_host.ip}:{ETCD_PEER_PORT}"
        self._start_etcd([(etcd_host, etcd_pub)], initial=f"skiff={peer}", echo=echo,
                         timeout=30.0)
        self._start_apiserver(api_host, api_pub, [f"{scheme}://{etcd_host.ip}:{ETCD_PORT}"],
                              echo=echo, timeout=30.0)
        kubeconfig = write_kubeconfig(self.data_dir, f"{scheme}://{http_pub.address}",
                                      security=self.security)
        echo(f"{'kubectl':<22} {'':<12} {scheme}://{http_pub.address:<18} "
             f"export KUBECONFIG={kubeconfig}")
        self._start_services(services, [f"{api_host.ip}:{API_PORT}"], health_pubs,
                             echo=echo, timeout=30.0)
        if self.fence_agent and service_available("skiff.fence_agent"):
            self.start_fence_agent(echo=echo)

    def _start_gateway(self, api_address: str, echo: Any) -> None:
        """The one process in the root namespace that forwards each published port."""
        gateway = Process("gateway", [*python_module("skiff.cli.netns"), "gateway",
                                      *[a for p in self.published for a in (
                                          "--route", f"{p.sock.fileno()}:{p.netns}:{p.port}")]],
                          self.data_dir / "logs" / "gateway.log", env=ENV)
        gateway.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(gateway.log_path, "ab") as log:
            gateway.popen = subprocess.Popen(
                gateway.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **ENV}, start_new_session=True,
                pass_fds=[p.sock.fileno() for p in self.published])
        for pub in self.published:
            pub.sock.close()  # the gateway holds them now
        # Its health is the apiserver's health through it: both must work to be "healthy".
        self._record(gateway, "", api_address, api_address, gateway.argv)
        echo(_line("gateway", gateway, f"{api_address} (API)"))

    def _start_etcd(self, members: list[tuple[Host, Published]], *, initial: str,
                    cluster_token: str = "", echo: Any, timeout: float) -> None:
        """Every member at once (a member is healthy only with a quorum), then waited
        for through its published port."""
        tls = self.security.etcd_tls()
        scheme = self.security.scheme
        started = []
        for host, pub in members:
            argv = _etcd_argv(self.data_dir, host.ip, initial=initial, tls=tls,
                              member=host.name if cluster_token else "skiff",
                              data=host.name if cluster_token else "etcd",
                              cluster_token=cluster_token)
            proc = Process(host.name, ns_exec(host.netns, argv),
                           self.data_dir / "logs" / f"{host.name}.log")
            proc.start()
            started.append((proc, host, pub, argv))
        for proc, host, pub, argv in started:
            wait_etcd_healthy(proc, int(pub.address.rsplit(":", 1)[1]), timeout=timeout,
                              tls=tls)
            self._record(proc, host.netns, f"{scheme}://{pub.address}", "", argv)
            echo(_line(proc.name, proc, f"{scheme}://{host.ip}:{ETCD_PORT}"))

    def _start_apiserver(self, host: Host, pub: Published, etcd_urls: list[str], *,
                         echo: Any, timeout: float) -> None:
        config_dir = self.data_dir / "config"
        key = ["--service-account-signing-key-file",
               str(self.data_dir / "pki" / "service-account.key")] if self.security.secure \
            else []
        argv = [*python_module("skiff.apiserver"), "--etcd-servers", ",".join(etcd_urls),
                "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT),
                "--http-port", str(API_HTTP_PORT),
                "--advertise-address", host.ip,  # the kubernetes Service's endpoint
                *self.security.apiserver_args(), *key,
                *self.config.flags("apiserver", config_dir),
                *self.extra_args.get("apiserver", [])]
        proc = Process(host.name, ns_exec(host.netns, argv),
                       self.data_dir / "logs" / f"{host.name}.log", env=ENV)
        proc.start()
        wait_grpc_healthy(proc, pub.address, timeout=timeout,
                          credentials=self.security.credentials())
        self._record(proc, host.netns, pub.address, pub.address, argv)
        echo(_line(proc.name, proc, f"{host.ip}:{API_PORT}"))

    def _start_services(self, services: list[tuple[str, str, str, list[str]]],
                        targets: list[str], health_pubs: dict[str, Published], *,
                        echo: Any, timeout: float) -> None:
        """Start together, then wait for each: faster on a small machine. Each service
        lists every apiserver, a different one first (spread over them)."""
        assert self.topology is not None
        started = []
        for spread, (name, host_name, module, args) in enumerate(services):
            if not service_available(module):
                continue
            host = self.topology.host(host_name)
            argv = [*python_module(module),
                    "--apiserver", ",".join(targets[spread % len(targets):]
                                            + targets[:spread % len(targets)]),
                    "--health-port", str(HEALTH_PORT), *args]
            proc = Process(name, ns_exec(host.netns, argv),
                           self.data_dir / "logs" / f"{name}.log",
                           env={**ENV, **self.security.component_env(name)})
            proc.start()
            started.append((proc, host, argv, health_pubs[name].address))
        for proc, host, argv, health in started:
            wait_grpc_healthy(proc, health, timeout=timeout)
            self._record(proc, host.netns, health, health, argv)
            echo(_line(proc.name, proc, f"{host.ip} ({host.netns})"))

    def start_fence_agent(self, *, echo: Any = print) -> Process:
        """The fence agent, in the root namespace (out of band), through the gateway."""
        health_port = free_port()
        argv = [*python_module("skiff.fence_agent"), "--apiserver", self.api,
                "--health-port", str(health_port), "--mode", "local",
                "--data-dir", str(self.data_dir), *self.extra_args.get("fence-agent", [])]
        proc = Process("fence-agent", argv, self.data_dir / "logs" / "fence-agent.log",
                       env={**ENV, **self.security.component_env("fence-agent")})
        self.save()  # the agent reads cluster.json
        proc.start()
        health = f"127.0.0.1:{health_port}"
        wait_grpc_healthy(proc, health)
        self._record(proc, "", health, health, argv)
        self.save()
        echo(_line("fence-agent", proc, f"{health} (root namespace: out of band)"))
        return proc

    def _services(self) -> list[tuple[str, str, str, list[str]]]:
        """(component name, host, module, args)."""
        config_dir = self.data_dir / "config"
        cm_args = [*self.config.flags("controllerManager", config_dir),
                   *self.extra_args.get("controller-manager", [])]
        services = [
            ("scheduler", "scheduler", "skiff.scheduler",
             [*self.config.flags("scheduler", config_dir),
              *self.extra_args.get("scheduler", []), "--leader-elect-identity", "scheduler"]),
            ("controller-manager", "controller-manager", "skiff.controller_manager",
             [*cm_args, "--leader-elect-identity", "controller-manager"]),
        ]
        if self.controller_managers > 1:
            services.append(("controller-manager-2", "controller-manager-2",
                             "skiff.controller_manager",
                             [*cm_args, "--leader-elect-identity", "controller-manager-2"]))
        services += [self._kubelet_service(i, config_dir) for i in range(1, self.nodes + 1)]
        return services + self._control_plane_service()

    def _control_plane_service(self) -> list[tuple[str, str, str, list[str]]]:
        """The control-plane node agent on its own host (cli/controlplane), if enabled."""
        assert self.topology is not None
        if CONTROL_PLANE_HOST not in self.topology.hosts:
            return []
        nodes = nodes_for(list(self.topology.hosts))
        args = ["--data-dir", str(self.data_dir), "--nodes", ",".join(nodes),
                "--node-ip", self._host_ip(CONTROL_PLANE_HOST)]
        pki = self.security.pki
        if pki is not None:
            args += ["--client-ca-file", str(pki.ca)]
            args += [a for n in nodes for a in (
                "--serving-certificate",
                f"{n}={pki.kubelet_serving[n].cert},{pki.kubelet_serving[n].key}")]
        return [("control-plane", CONTROL_PLANE_HOST, "skiff.cli.controlplane",
                 [*args, *self.config.flags("controlPlane", self.data_dir / "config")])]

    def _kubelet_service(self, i: int, config_dir: Path) -> tuple[str, str, str, list[str]]:
        """node-i's kubelet, on host node-i (the --ha cluster's too)."""
        node = f"node-{i}"
        labels = f"topology.kubernetes.io/zone={ZONES[(i - 1) % len(ZONES)]}"
        annotations = self.node_annotations.get(node, f"{FENCE_AGENT_ANNOTATION}=power")
        return (f"kubelet-{node}", node, "skiff.kubelet", [
            "--node-name", node, "--root-dir", str(self.data_dir / "nodes" / node),
            "--node-ip", self._host_ip(node),
            "--node-labels", labels, "--node-annotations", annotations,
            "--volume-root", str(self.data_dir / "volumes"),
            # pods' sandboxes join a bridge in the cluster's bridge namespace (SB2), never
            # the kubelet's default one, which other clusters and runs would share
            "--pod-network-namespace", self._bridge_netns(),
            "--pod-cidr-wait", POD_CIDR_WAIT,  # nodeipam runs: pods wait for a podCIDR
            *self.config.flags("kubelet", config_dir),
            *self.extra_args.get("kubelet", [])])

    def _bridge_netns(self) -> str:
        assert self.topology is not None
        return self.topology.bridge_netns

    def _host_ip(self, name: str) -> str:
        """The host's address in the cluster's subnet: a Node's InternalIP."""
        assert self.topology is not None
        return self.topology.host(name).ip

    def _record(self, proc: Process, netns: str, address: str, health: str,
                argv: list[str]) -> None:
        assert proc.pid is not None
        self.processes.append(proc)
        self.components.append(Component(proc.name, proc.pid, address, health,
                                         str(proc.log_path), argv, netns=netns,
                                         env=dict(proc.env)))

    # -- while running -------------------------------------------------------------------

    def component(self, name: str) -> Component:
        """The component as cluster.json records it now (the fence agent may restart a
        kubelet and record its new PID)."""
        state = ClusterState.load(self.data_dir)
        comps = state.components if state else self.components
        for comp in comps:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def restart(self, name: str) -> Component:
        """Start a stopped component again, the same way, in its namespace."""
        comp = self.component(name)
        argv = ns_exec(comp.netns, comp.argv) if comp.netns else comp.argv
        proc = Process(name, argv, Path(comp.log), env=comp.env or dict(ENV))
        proc.start()
        assert proc.pid is not None
        if comp.health:  # an apiserver's port is mutual TLS: the admin's kubeconfig
            secure = "--tls-cert-file" in comp.argv
            wait_grpc_healthy(proc, comp.health, credentials=cli_credentials(
                self.data_dir / "kubeconfig") if secure else None)
        self.processes.append(proc)
        state = ClusterState.load(self.data_dir)
        assert state is not None
        for c in state.components:
            if c.name == name:
                c.pid = proc.pid
        state.save(self.data_dir)
        self.components = state.components
        return self.component(name)

    def kill(self, name: str) -> int:
        """SIGKILL a component, as a crash would; returns the PID it had."""
        comp = self.component(name)
        for proc in self.processes:
            if proc.pid == comp.pid:
                proc.kill()  # our child: also reaped
                return comp.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(comp.pid, signal.SIGKILL)
        return comp.pid

    def partition(self, a: str, b: str | None = None) -> str:
        assert self.topology is not None
        return partition(self.topology, a, b)

    def heal(self, a: str | None = None) -> str:
        assert self.topology is not None
        return heal(self.topology, a)

    # -- stop ----------------------------------------------------------------------------

    def stop(self) -> str:
        """Stop everything (the pods' process groups too) and delete every namespace this
        cluster made (idempotent); returns how many pod groups were ended, as one line."""
        for pub in self.published:
            pub.sock.close()
        state = ClusterState.load(self.data_dir)
        components = state.components if state else self.components
        roots = kubelet_root_dirs(self.data_dir, [c.argv for c in components
                                                  if c.name.startswith("kubelet-")])
        for comp in reversed(components):
            stop_component(comp, timeout=5)
        for proc in reversed(self.processes):
            proc.stop(timeout=5)
        ended = end_pod_groups(roots)
        if self.topology is not None:
            destroy(self.topology)
        remove_sandboxes(roots, "")  # the pods' namespaces the kubelets named (SB4)
        remove_recorded(roots)  # and their cgroups (AU8)
        with contextlib.suppress(OSError):
            (self.data_dir / STATE_FILE).unlink()
        return summary(ended)


def _etcd_argv(data_dir: Path, ip: str, *, initial: str, tls: EtcdTlsFiles | None,
               member: str = "skiff", data: str = "etcd", cluster_token: str = "") -> list[str]:
    """One member on its host's address (and the namespace's loopback, for the gateway);
    `cluster_token`: one of the --ha members (pre-vote, as `etcd_process`)."""
    scheme = "https" if tls is not None else "http"
    client, peer = f"{scheme}://{ip}:{ETCD_PORT}", f"{scheme}://{ip}:{ETCD_PEER_PORT}"
    clustered = ["--initial-cluster-token", cluster_token, "--pre-vote"] \
        if cluster_token else []
    return [find_etcd(), "--name", member, "--data-dir", str(data_dir / data),
            "--listen-client-urls", f"{client},{scheme}://127.0.0.1:{ETCD_PORT}",
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", initial, "--initial-cluster-state", "new", *clustered,
            "--logger", "zap", "--log-outputs", "stderr",
            "--quota-backend-bytes", str(2 * 1024**3),
            *(tls.args() if tls is not None else [])]


def _line(name: str, proc: Process, address: str) -> str:
    return f"{name:<22} pid {proc.pid:<8} {address:<24} log {proc.log_path}"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "gateway":
        sys.exit("usage: python -m skiff.cli.netns gateway --route FD:NETNS:PORT ...")
    gateway_main(args[1:])


if __name__ == "__main__":
    main()
