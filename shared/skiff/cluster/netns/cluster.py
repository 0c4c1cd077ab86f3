"""`skiff up --netns` (and `--ha --netns`): a cluster whose components sit on separate
network hosts, so partitions are real network cuts (SPEC SC2) without Docker. Linux only,
root only.

Each control-plane member of the cluster's `Topology` and each node gets a host of its own
(`hosts`: a network namespace on the cluster's bridge). Processes start as
`ip netns exec <ns> argv` (ip execs without forking, so the PID and /proc cmdline are the
service's own) and are recorded in cluster.json like `skiff up` records them, with their
namespace. The host reaches the cluster through one gateway process (`gateway`); in an HA
topology the etcd members peer over their host addresses (ports 2379/2380 on each host),
each apiserver lists every member, its own first, and every service gets every apiserver's
host address.

The fence agent runs in the root namespace: it is the out-of-band BMC (SPEC FN2). It talks
to the apiserver through the gateway, kills processes by PID and starts a node's kubelet
again inside the node's namespace (the recorded `netns`), so no partition reaches it.

Partitions are `partitions`'s nftables cuts. Security (SPEC AU1-AU4) is as in a plain
`skiff up`: TLS and client certificates by default (the serving certificates name every
control-plane host's address, each kubelet's its node's), components with their own
identities (recorded with them, so restarts keep them), a kubeconfig with the admin's
certificate; `insecure=True` (`--insecure`) is plaintext.

`skiff down` stops the recorded processes, kills whatever still runs in the cluster's
namespaces (`ip netns pids`: pod processes), then deletes those namespaces, and only those.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skiff.api.wellknown import FENCE_AGENT_ANNOTATION
from skiff.bootstraptoken import BOOTSTRAP_CONTROLLERS
from skiff.client.credentials import Credentials
from skiff.cluster import launch
from skiff.cluster.advertise import GRPC_PORT, HTTPS_PORT
from skiff.cluster.config import ClusterConfig
from skiff.cluster.controlplane.mirror import nodes_for
from skiff.cluster.kubeconfig import cli_credentials, write_kubeconfig
from skiff.cluster.netns.commands import (
    GATEWAY_MODULE,
    NetnsError,
    ns_exec,
    require_netns_support,
)
from skiff.cluster.netns.hosts import (
    CONTROL_PLANE_HOST,
    PREFIX_LEN,
    SUBNET,
    Host,
    Network,
    create_bridge,
    destroy,
)
from skiff.cluster.netns.partitions import heal, partition
from skiff.cluster.processes import (
    EtcdTlsFiles,
    Process,
    find_etcd,
    free_port,
    python_module,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cluster.security import ClusterSecurity, prepare
from skiff.cluster.state import ClusterState, Component
from skiff.cluster.teardown import end_pods, forget, pod_roots, stop_recorded
from skiff.cluster.topology import CLUSTER_TOKEN, SINGLE, Topology, rotated

__all__ = ["NetnsCluster", "destroy_by_state"]

ETCD_PORT, ETCD_PEER_PORT = 2379, 2380
API_PORT, API_HTTP_PORT = GRPC_PORT, HTTPS_PORT  # the well-known ports, as advertised
HEALTH_PORT = 10256


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
    `skiff.io/fence-agent=power`); `topology` says how many of each control-plane member
    run, every one on its own host (`Topology(controller_managers=2)`: a second
    controller-manager; `HA`: the replicated control plane).
    """

    data_dir: Path
    nodes: int = 3
    config: ClusterConfig = field(default_factory=ClusterConfig)
    extra_args: dict[str, list[str]] = field(default_factory=dict)
    node_annotations: dict[str, str] = field(default_factory=dict)
    topology: Topology = SINGLE
    fence_agent: bool = True
    insecure: bool = False  # `skiff up --netns --insecure`: the plaintext mode (warned)
    # `skiff up --netns`: the control-plane Node and mirror pods (cluster/controlplane), from
    # an agent on a host of its own
    mirror_pods: bool = False
    security: ClusterSecurity = field(default_factory=lambda: ClusterSecurity(None))
    network: Network | None = None
    processes: list[Process] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    api: str = ""

    # -- start ---------------------------------------------------------------------------

    def start(self, *, echo: Any = print) -> ClusterState:
        require_netns_support()
        launch.refuse_if_running(self.data_dir)
        find_etcd()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.network = topo = Network.new()
        try:
            create_bridge(topo.bridge_netns)
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
        """One host per control-plane member and per node."""
        return [*self.topology.etcd_names(), *self.topology.apiserver_names(),
                *self.topology.replicas("scheduler"),
                *self.topology.replicas("controller-manager"),
                *(f"node-{i}" for i in range(1, self.nodes + 1))]

    def _prepare_security(self, echo: Any) -> ClusterSecurity:
        """The PKI, with every control-plane host's address in the serving certificates
        and each node's address in its kubelet's; or the announced insecure mode."""
        assert self.network is not None
        hosts = self.network.hosts
        nodes = {name: [h.ip] for name, h in hosts.items() if name.startswith("node-")}
        if CONTROL_PLANE_HOST in hosts:  # the agent's Nodes, for their log endpoints
            nodes.update({n: [hosts[CONTROL_PLANE_HOST].ip] for n in nodes_for(list(hosts))})
        return prepare(self.data_dir, insecure=self.insecure, nodes=list(nodes),
                       hosts=[h.ip for name, h in hosts.items() if name not in nodes],
                       node_hosts=nodes, echo=echo)

    def save(self) -> ClusterState:
        assert self.network is not None
        state = ClusterState(api=self.api, data_dir=str(self.data_dir),
                             components=self.components, started=time.time(),
                             netns=self.network.to_json())
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
        topo = self.network
        assert topo is not None
        timeout = self.topology.start_timeout
        etcd_hosts = [topo.host(name) for name in self.topology.etcd_names()]
        api_hosts = [topo.host(name) for name in self.topology.apiserver_names()]
        # The gateway first: every published socket exists before anything starts.
        etcd_pubs = [self._publish(h.name, h.netns, ETCD_PORT) for h in etcd_hosts]
        api_pubs = [self._publish(h.name, h.netns, API_PORT) for h in api_hosts]
        http_pubs = [self._publish(f"{h.name}-http", h.netns, API_HTTP_PORT)
                     for h in api_hosts]
        services = self._services()
        health_pubs = {name: self._publish(name, topo.host(host).netns, HEALTH_PORT)
                       for name, host, _, _ in services}
        self.api = ",".join(p.address for p in api_pubs)
        self._start_gateway(api_pubs[0].address, echo)
        scheme = self.security.scheme
        clustered = self.topology.replicated_etcd
        initial = ",".join(f"{h.name if clustered else 'skiff'}="
                           f"{scheme}://{h.ip}:{ETCD_PEER_PORT}" for h in etcd_hosts)
        self._start_etcd(list(zip(etcd_hosts, etcd_pubs, strict=True)), initial=initial,
                         cluster_token=CLUSTER_TOKEN if clustered else "", echo=echo,
                         timeout=timeout)
        etcd_urls = [f"{scheme}://{h.ip}:{ETCD_PORT}" for h in etcd_hosts]
        for i, (host, pub) in enumerate(zip(api_hosts, api_pubs, strict=True)):
            # each apiserver lists every member, its own first
            self._start_apiserver(host, pub, rotated(etcd_urls, i), echo=echo,
                                  timeout=timeout)
        urls = [f"{scheme}://{p.address}" for p in http_pubs]
        kubeconfig = write_kubeconfig(self.data_dir, *urls, security=self.security)
        others = "  (contexts skiff, skiff-apiserver-2)" if len(urls) > 1 else ""
        echo(f"{'kubectl':<22} {'':<12} {', '.join(urls):<18} "
             f"export KUBECONFIG={kubeconfig}{others}")
        self._start_services(services, [f"{h.ip}:{API_PORT}" for h in api_hosts],
                             health_pubs, echo=echo, timeout=timeout)
        if self.fence_agent and launch.service_available("skiff.fence_agent"):
            self.start_fence_agent(echo=echo)

    def _start_gateway(self, api_address: str, echo: Any) -> None:
        """The one process in the root namespace that forwards each published port."""
        gateway = Process("gateway", [*python_module(GATEWAY_MODULE),
                                      *[a for p in self.published for a in (
                                          "--route", f"{p.sock.fileno()}:{p.netns}:{p.port}")]],
                          self.data_dir / "logs" / "gateway.log", env=launch.ENV)
        gateway.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(gateway.log_path, "ab") as log:
            gateway.popen = subprocess.Popen(
                gateway.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **launch.ENV}, start_new_session=True,
                pass_fds=[p.sock.fileno() for p in self.published])
        for pub in self.published:
            pub.sock.close()  # the gateway holds them now
        # Its health is the apiserver's health through it: both must work to be "healthy".
        self._record(gateway, "", api_address, api_address, gateway.argv)
        echo(launch.started_line("gateway", gateway, f"{api_address} (API)"))

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
            echo(launch.started_line(proc.name, proc, f"{scheme}://{host.ip}:{ETCD_PORT}"))

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
                       self.data_dir / "logs" / f"{host.name}.log", env=launch.ENV)
        proc.start()
        wait_grpc_healthy(proc, pub.address, timeout=timeout,
                          credentials=self.security.credentials())
        self._record(proc, host.netns, pub.address, pub.address, argv)
        echo(launch.started_line(proc.name, proc, f"{host.ip}:{API_PORT}"))

    def _start_services(self, services: list[tuple[str, str, str, list[str]]],
                        targets: list[str], health_pubs: dict[str, Published], *,
                        echo: Any, timeout: float) -> None:
        """Start together, then wait for each: faster on a small machine. Each service
        lists every apiserver, a different one first (spread over them)."""
        assert self.network is not None
        started = []
        for spread, (name, host_name, module, args) in enumerate(services):
            if not launch.service_available(module):
                continue
            host = self.network.host(host_name)
            argv = [*python_module(module),
                    "--apiserver", ",".join(targets[spread % len(targets):]
                                            + targets[:spread % len(targets)]),
                    "--health-port", str(HEALTH_PORT), *args]
            proc = Process(name, ns_exec(host.netns, argv),
                           self.data_dir / "logs" / f"{name}.log",
                           env={**launch.ENV, **self.security.component_env(name)})
            proc.start()
            started.append((proc, host, argv, health_pubs[name].address))
        for proc, host, argv, health in started:
            wait_grpc_healthy(proc, health, timeout=timeout)
            self._record(proc, host.netns, health, health, argv)
            echo(launch.started_line(proc.name, proc, f"{host.ip} ({host.netns})"))

    def start_fence_agent(self, *, echo: Any = print) -> Process:
        """The fence agent, in the root namespace (out of band), through the gateway."""
        health_port = free_port()
        argv = [*python_module("skiff.fence_agent"), "--apiserver", self.api,
                "--health-port", str(health_port), "--mode", "local",
                "--data-dir", str(self.data_dir), *self.extra_args.get("fence-agent", [])]
        proc = Process("fence-agent", argv, self.data_dir / "logs" / "fence-agent.log",
                       env={**launch.ENV, **self.security.component_env("fence-agent")})
        self.save()  # the agent reads cluster.json
        proc.start()
        health = f"127.0.0.1:{health_port}"
        wait_grpc_healthy(proc, health)
        self._record(proc, "", health, health, argv)
        self.save()
        echo(launch.started_line("fence-agent", proc, f"{health} (root namespace: out of band)"))
        return proc

    def _services(self) -> list[tuple[str, str, str, list[str]]]:
        """(component name = host name, host, module, args)."""
        config_dir = self.data_dir / "config"
        services = [(name, name, "skiff.scheduler",
                     [*self.config.flags("scheduler", config_dir),
                      *self.extra_args.get("scheduler", []), "--leader-elect-identity", name])
                    for name in self.topology.replicas("scheduler")]
        services += [(name, name, "skiff.controller_manager",
                      ["--controllers", BOOTSTRAP_CONTROLLERS,  # SPEC JN3; config may override
                       *self.config.flags("controllerManager", config_dir),
                       *self.security.controller_manager_args(),  # SPEC JN2: csrsigning
                       *self.extra_args.get("controller-manager", []),
                       "--leader-elect-identity", name])
                     for name in self.topology.replicas("controller-manager")]
        services += [self._kubelet_service(i, config_dir) for i in range(1, self.nodes + 1)]
        return services + self._control_plane_service()

    def _control_plane_service(self) -> list[tuple[str, str, str, list[str]]]:
        """The control-plane node agent on its own host (cluster/controlplane), if enabled."""
        assert self.network is not None
        if CONTROL_PLANE_HOST not in self.network.hosts:
            return []
        nodes = nodes_for(list(self.network.hosts))
        args = ["--data-dir", str(self.data_dir), "--nodes", ",".join(nodes),
                "--node-ip", self._host_ip(CONTROL_PLANE_HOST)]
        pki = self.security.pki
        if pki is not None:
            args += ["--client-ca-file", str(pki.ca)]
            args += [a for n in nodes for a in (
                "--serving-certificate",
                f"{n}={pki.kubelet_serving[n].cert},{pki.kubelet_serving[n].key}")]
        return [("control-plane", CONTROL_PLANE_HOST, launch.CONTROL_PLANE_MODULE,
                 [*args, *self.config.flags("controlPlane", self.data_dir / "config")])]

    def _kubelet_service(self, i: int, config_dir: Path) -> tuple[str, str, str, list[str]]:
        """node-i's kubelet, on host node-i (the --ha cluster's too)."""
        node = f"node-{i}"
        annotations = self.node_annotations.get(node, f"{FENCE_AGENT_ANNOTATION}=power")
        return (f"kubelet-{node}", node, "skiff.kubelet", [
            "--node-name", node, "--root-dir", str(self.data_dir / "nodes" / node),
            "--node-ip", self._host_ip(node),
            "--node-labels", launch.zone_label(i), "--node-annotations", annotations,
            "--volume-root", str(self.data_dir / "volumes"),
            # pods' sandboxes join a bridge in the cluster's bridge namespace (SB2), never
            # the kubelet's default one, which other clusters and runs would share
            "--pod-network-namespace", self._bridge_netns(),
            "--pod-cidr-wait", launch.POD_CIDR_WAIT,  # nodeipam runs: pods wait for a podCIDR
            *self.config.flags("kubelet", config_dir),
            *self.extra_args.get("kubelet", [])])

    def _bridge_netns(self) -> str:
        assert self.network is not None
        return self.network.bridge_netns

    def _host_ip(self, name: str) -> str:
        """The host's address in the cluster's subnet: a Node's InternalIP."""
        assert self.network is not None
        return self.network.host(name).ip

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
        proc = Process(name, argv, Path(comp.log), env=comp.env or dict(launch.ENV))
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
        assert self.network is not None
        return partition(self.network, a, b)

    def heal(self, a: str | None = None) -> str:
        assert self.network is not None
        return heal(self.network, a)

    # -- stop ----------------------------------------------------------------------------

    def stop(self) -> str:
        """Stop everything (the pods' process groups too) and delete every namespace this
        cluster made (idempotent); returns how many pod groups were ended, as one line."""
        for pub in self.published:
            pub.sock.close()
        state = ClusterState.load(self.data_dir)
        components = state.components if state else self.components
        roots = pod_roots(self.data_dir, components)
        stop_recorded(components, timeout=5)
        for proc in reversed(self.processes):
            proc.stop(timeout=5)
        ended = end_pods(roots)
        if self.network is not None:
            destroy(self.network)
        forget(self.data_dir, roots, pod_network="")  # the pods' own namespaces only
        return ended


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


def destroy_by_state(data_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """`skiff down` of a netns cluster: processes in reverse start order, then whatever
    still runs in its namespaces, then the namespaces."""
    state = ClusterState.load(data_dir)
    if state is None or not state.netns:
        raise NetnsError(f"no netns cluster state in {data_dir}")
    roots = pod_roots(data_dir, state.components)
    lines = stop_recorded(state.components, timeout=timeout)
    lines.append(end_pods(roots))
    for netns in destroy(Network.from_json(state.netns)):
        lines.append(f"{'netns':<22} {netns} deleted")
    forget(data_dir, roots, pod_network="")  # the pods' own namespaces only
    return lines
