"""A cluster as local processes on loopback: `skiff up` (and `--ha`), `skiff down`.

etcd, the apiservers and every other service that is installed (schedulers,
controller-managers, one kubelet per node, the control-plane agent, the fence agent) run as
child processes on free loopback ports, each with its log under `<data-dir>/logs/`; how
many of each is the cluster's `Topology` (`topology.SINGLE` or `topology.HA`). The
cluster's state (PIDs, addresses) is written to `<data-dir>/cluster.json`, which is how
`skiff down` stops each process by PID and how every other command finds the apiserver.

Independent starts overlap: the apiservers' interpreters load while etcd comes up (they
retry etcd), and every other component while both do; then each is waited for in order.

The fence agent (when installed) runs in local mode over the same data dir: it may kill a
node's kubelet and pods (power fencing, `<data-dir>/fenced/<node>` marks the node) and start
the kubelet again on unfence, recording the new PID in cluster.json. So a fenced kubelet's
exit is expected, and stopping the cluster also stops kubelets the fence agent started.
Every kubelet gets the shared `--volume-root <data-dir>/volumes` and the node annotation
`skiff.io/fence-agent=power`.

`advertise_address` (`skiff up --advertise-address IP`, or the `apiserver` section's
`advertiseAddress`): the apiservers listen on every address on fixed ports and the cluster's
API, kubeconfig and certificate name that address (`advertise`); the local components
still dial loopback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skiff.api.serviceips import DEFAULT_SERVICE_CIDR, dns_service_ip
from skiff.api.wellknown import FENCE_AGENT_ANNOTATION
from skiff.bootstraptoken import BOOTSTRAP_CONTROLLERS
from skiff.cluster import advertise
from skiff.cluster.config import ClusterConfig
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.launch import (
    CONTROL_PLANE_MODULE,
    ENV,
    POD_CIDR_WAIT,
    refuse_if_running,
    service_available,
    started_line,
    zone_label,
)
from skiff.cluster.processes import (
    Process,
    StartError,
    etcd_process,
    find_etcd,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cluster.sandboxes import isolation_warning, pod_network_namespace
from skiff.cluster.security import ClusterSecurity, prepare
from skiff.cluster.state import ClusterState, Component, stop_component
from skiff.cluster.supervisor import stop_supervisor
from skiff.cluster.teardown import end_pods, forget, pod_roots, stop_recorded
from skiff.cluster.topology import CLUSTER_TOKEN, SINGLE, Topology, rotated

__all__ = ["LocalCluster", "stop_by_state"]


@dataclass
class _Member:
    """A started process and the addresses to record once it answered."""

    proc: Process
    address: str
    health: str


@dataclass
class LocalCluster:
    data_dir: Path
    nodes: int = 3
    config: ClusterConfig = field(default_factory=ClusterConfig)
    topology: Topology = SINGLE
    processes: list[Process] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    insecure: bool = False  # `skiff up --insecure`: the old plaintext mode (warned)
    apiserver_processes: int = 1  # > 1: `--processes`, sharing the ports (SO_REUSEPORT)
    # Seconds from the start of `start()` until each component answered its health check.
    start_seconds: dict[str, float] = field(default_factory=dict)
    # One apiserver: its HTTP front is the address pods' in-cluster clients get, and the
    # CA their ServiceAccount volume carries. Several: no front is picked (no proxy).
    kube_api_address: str = ""
    root_ca_file: str = ""
    advertise_address: str = ""  # `skiff up --advertise-address`; see `advertised()`
    _sec: ClusterSecurity = field(init=False, repr=False,
                                  default_factory=lambda: ClusterSecurity(None))

    def _record(self, member: _Member, began: float) -> None:
        proc = member.proc
        assert proc.pid is not None
        self.processes.append(proc)
        self.components.append(Component(proc.name, proc.pid, member.address,
                                          member.health, str(proc.log_path), proc.argv,
                                          env=proc.env))
        self.start_seconds[proc.name] = time.monotonic() - began

    def start(self, *, echo: Any = print) -> ClusterState:
        public = self.advertised()
        if public:
            if self.insecure:
                raise StartError("--advertise-address with --insecure would serve the API "
                                 "to other machines without TLS or authentication; drop "
                                 "--insecure")
            public = self.advertise_address = advertise.check_address(public)
        refuse_if_running(self.data_dir)
        if public:  # after: a running cluster of this data dir holds them
            advertise.check_ports(self.topology.apiserver_names())
        find_etcd()
        warning = isolation_warning(self.config.sections.get("kubelet", {}))
        if warning:
            echo(warning)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        sec = self._sec = self.security(echo, hosts=(public,) if public else ())
        timeout = self.topology.start_timeout
        started: list[_Member] = []
        try:
            began = time.monotonic()
            etcd = self._start_etcd()
            started += etcd
            apiservers, http_urls, public_targets = self._start_apiservers(
                [m.address for m in etcd])
            started += apiservers
            api_targets = [m.address for m in apiservers]  # loopback, for the components
            services = self._start_services(api_targets)
            started += services
            for member in etcd:
                port = int(member.address.rsplit(":", 1)[1])
                wait_etcd_healthy(member.proc, port, timeout=timeout, tls=sec.etcd_tls())
                self._record(member, began)
                echo(started_line(member.proc.name, member.proc, member.address))
            for member in apiservers:
                wait_grpc_healthy(member.proc, member.address, timeout=timeout,
                                  credentials=sec.credentials())
                self._record(member, began)
                echo(started_line(member.proc.name, member.proc, member.address))
            kubeconfig = write_kubeconfig(self.data_dir, *http_urls, security=sec)
            others = "  (context skiff-apiserver-2 for the other)" if len(http_urls) > 1 \
                else ""
            echo(f"{'kubectl':<22} {'':<12} {', '.join(http_urls)}   "
                 f"export KUBECONFIG={kubeconfig}{others}")
            if sec.pki is not None:
                echo(f"{'credentials':<22} {'':<12} {sec.pki.directory}   (CA, admin "
                     f"certificate in system:masters; files 0600)")
            for member in services:
                wait_grpc_healthy(member.proc, member.health, timeout=timeout)
                self._record(member, began)
                echo(started_line(member.proc.name, member.proc, member.health))
        except BaseException:
            self.stop()
            for left in started:
                if left.proc not in self.processes:  # started, not recorded
                    left.proc.stop()
            raise
        state = ClusterState(api=",".join(public_targets), data_dir=str(self.data_dir),
                             components=self.components, started=time.time())
        state.save(self.data_dir)
        return state

    def _start_etcd(self) -> list[_Member]:
        """Every member at once: a member is healthy only once a quorum is up."""
        names = self.topology.etcd_names()
        ports = [(free_port(), free_port()) for _ in names]
        scheme, tls = self._sec.scheme, self._sec.etcd_tls()
        clustered = self.topology.replicated_etcd
        initial = ",".join(f"{name}={scheme}://127.0.0.1:{peer}"
                           for name, (_, peer) in zip(names, ports, strict=True))
        members = []
        for name, (client, peer) in zip(names, ports, strict=True):
            proc = etcd_process(self.data_dir, client_port=client, peer_port=peer,
                                name=name, tls=tls,
                                **({"member": name, "initial_cluster": initial,
                                    "cluster_token": CLUSTER_TOKEN} if clustered else {}))
            proc.start()
            members.append(_Member(proc, f"{scheme}://127.0.0.1:{client}", ""))
        return members

    def advertised(self) -> str:
        """The address other machines reach the apiservers at ("" = loopback only)."""
        return self.advertise_address or str(
            self.config.sections.get("apiserver", {}).get(advertise.ADVERTISE_KEY) or "")

    def _start_apiservers(self, etcd_urls: list[str]
                          ) -> tuple[list[_Member], list[str], list[str]]:
        """Each a full replica listing every etcd member, a different one first. Returns
        the members, the kubeconfig's HTTPS URLs and the cluster's gRPC addresses (the
        advertised address when there is one, else loopback)."""
        config_dir = self.data_dir / "config"
        public = self.advertised()
        members, http_urls, targets = [], [], []
        for i, name in enumerate(self.topology.apiserver_names()):
            api_port, http_port = advertise.ports(i) if public else (free_port(), free_port())
            target = f"127.0.0.1:{api_port}"
            proc = service_process(name, "skiff.apiserver", [
                "--etcd-servers", ",".join(rotated(etcd_urls, i)),
                "--secure-port", str(api_port), "--http-port", str(http_port),
                *self._sec.apiserver_args(),
                # One key for all: a token one apiserver issued verifies at the others.
                "--service-account-signing-key-file",
                str(self.data_dir / "pki" / "service-account.key"),
                *(["--processes", str(self.apiserver_processes)]
                  if self.apiserver_processes > 1 else []),
                *self.config.flags("apiserver", config_dir),
                # every address (loopback too); the `kubernetes` Service names this one
                *(["--bind-address", "0.0.0.0", "--advertise-address", public]
                  if public else [])],
                log_dir=self.data_dir / "logs", env=ENV)
            proc.start()
            members.append(_Member(proc, target, target))
            http_urls.append(f"{self._sec.scheme}://{public or '127.0.0.1'}:{http_port}")
            targets.append(f"{public}:{api_port}" if public else target)
        if len(members) == 1:
            self.kube_api_address = f"127.0.0.1:{http_urls[0].rsplit(':', 1)[1]}"
            # Pods' ServiceAccount volume carries the CA, so in-cluster clients verify HTTPS.
            self.root_ca_file = str(self._sec.pki.ca) if self._sec.pki is not None else ""
        return members, http_urls, targets

    def _start_services(self, api_targets: list[str]) -> list[_Member]:
        """Every other installed service, each listing every apiserver (spread over them)."""
        members: list[_Member] = []
        for name, module, extra in self._services():
            if not service_available(module):
                continue
            health = f"127.0.0.1:{free_port()}"
            proc = service_process(name, module, [
                "--apiserver", ",".join(rotated(api_targets, len(members))),
                "--health-port", health.rsplit(":", 1)[1], *extra],
                log_dir=self.data_dir / "logs", env={**ENV, **self._sec.component_env(name)})
            proc.start()
            members.append(_Member(proc, health, health))
        return members

    def security(self, echo: Any = print, *, hosts: tuple[str, ...] = ()) -> ClusterSecurity:
        """The PKI (made once, in <data-dir>/pki) or the announced insecure mode."""
        return prepare(self.data_dir, insecure=self.insecure,
                       nodes=[*(f"node-{i}" for i in range(1, self.nodes + 1)),
                              *self.topology.control_plane_nodes()], hosts=hosts,
                       echo=echo, service_cidr=self._service_cidr())

    def _control_plane_agent(self) -> tuple[str, str, list[str]]:
        """The control-plane node agent: the Nodes, mirror pods and logs of kube-system's
        control plane; with a PKI each Node's kubelet serving certificate for its logs."""
        nodes = self.topology.control_plane_nodes()
        args = ["--data-dir", str(self.data_dir), "--nodes", ",".join(nodes)]
        if self._sec.pki is not None:
            args += ["--client-ca-file", str(self._sec.pki.ca)]
            for node in nodes:
                pair = self._sec.pki.kubelet_serving[node]
                args += ["--serving-certificate", f"{node}={pair.cert},{pair.key}"]
        return ("control-plane", CONTROL_PLANE_MODULE,
                [*args, *self.config.flags("controlPlane", self.data_dir / "config")])

    def _service_cidr(self) -> str:
        return str(self.config.sections.get("apiserver", {}).get("serviceClusterIPRange")
                   or DEFAULT_SERVICE_CIDR)

    def _services(self) -> list[tuple[str, str, list[str]]]:
        config_dir = self.data_dir / "config"
        services = [(name, "skiff.scheduler", [*self.config.flags("scheduler", config_dir),
                                               "--leader-elect-identity", name])
                    for name in self.topology.replicas("scheduler")]
        services += [(name, "skiff.controller_manager",
                      ["--controllers", BOOTSTRAP_CONTROLLERS,  # SPEC JN3; config may override
                       *self.config.flags("controllerManager", config_dir),
                       "--local-volume-root", str(self.data_dir / "volumes"),
                       *self._sec.controller_manager_args(),  # SPEC JN2: csrsigning
                       "--leader-elect-identity", name])
                     for name in self.topology.replicas("controller-manager")]
        for i in range(1, self.nodes + 1):
            node = f"node-{i}"
            services.append((f"kubelet-{node}", "skiff.kubelet", [
                "--node-name", node, "--root-dir", str(self.data_dir / "nodes" / node),
                "--node-labels", zone_label(i),
                "--node-annotations", f"{FENCE_AGENT_ANNOTATION}=power",
                "--volume-root", str(self.data_dir / "volumes"),
                *(["--kube-api-address", self.kube_api_address]
                  if self.kube_api_address else []),
                *(["--root-ca-file", self.root_ca_file] if self.root_ca_file else []),
                "--pod-network-namespace", pod_network_namespace(self.data_dir),
                "--pod-cidr-wait", POD_CIDR_WAIT,  # nodeipam runs: pods wait for a podCIDR
                "--cluster-dns", dns_service_ip(self._service_cidr()),  # kube-dns's address
                *self.config.flags("kubelet", config_dir)]))
        services.append(self._control_plane_agent())
        services.append(("fence-agent", "skiff.fence_agent",
                         ["--mode", "local", "--data-dir", str(self.data_dir)]))
        return services

    def _stop_adopted(self, timeout: float = 10.0) -> None:
        """Stop the kubelets the fence agent started again (recorded in cluster.json, not
        our children), each only if its /proc cmdline is still its recorded argv."""
        state = ClusterState.load(self.data_dir)
        ours = {p.pid for p in self.processes}
        for comp in [c for c in state.components if c.pid not in ours] if state else []:
            stop_component(comp, timeout=timeout)

    def stop(self) -> str:
        """Stop every service, then end the pods' process groups (the kubelets leave them
        running when they stop); returns how many pod groups were ended, as one line."""
        state = ClusterState.load(self.data_dir)
        roots = pod_roots(self.data_dir, state.components if state else self.components)
        for proc in reversed(self.processes):
            proc.stop()
        self._stop_adopted()
        ended = end_pods(roots)
        forget(self.data_dir, roots, pod_network=pod_network_namespace(self.data_dir))
        return ended


def stop_by_state(data_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """`skiff down`: stop every recorded PID in reverse start order, each before the next
    (SIGTERM, then SIGKILL after `timeout`), so a service can still reach the apiserver
    while it shuts down (e.g. the controller-manager releasing its lease)."""
    state = ClusterState.load(data_dir)
    if state is None:
        raise StartError(f"no cluster state in {data_dir}; nothing to stop "
                         "(was it started with `skiff up --detach`?)")
    stopped = []
    if state.supervisor_pid:  # first, so that nothing stopped below is started again
        stopped += stop_supervisor(state.supervisor_pid, timeout=timeout,
                                   data_dir=data_dir)
        state = ClusterState.load(data_dir) or state  # with the PIDs it started last
    roots = pod_roots(data_dir, state.components)
    stopped += stop_recorded(state.components, timeout=timeout)
    stopped.append(end_pods(roots))
    forget(data_dir, roots, pod_network=pod_network_namespace(data_dir))
    return stopped
