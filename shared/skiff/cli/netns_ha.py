"""`skiff up --ha --netns`: the replicated control plane (cli/topology.py) with every
replica on its own network host (cli/netns.py), so `skiff chaos partition` cuts inside the
control plane are real: `partition etcd-3` (a minority member), `partition apiserver-1
--from etcd` (an apiserver loses every etcd member), `partition controller-manager-1 --from
apiserver` (a leader isolated from every apiserver).

Hosts: etcd-1..3, apiserver-1..2, scheduler-1..2, controller-manager-1..2, node-1..N. The
etcd members peer over their host addresses (ports 2379/2380 on each host); each apiserver
lists all three members, its own first; every service gets both apiservers' host addresses.
The host reaches each etcd member, each apiserver (gRPC and HTTP) and each health port
through the gateway, as in a plain --netns cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from skiff.cli.localcluster import FENCE_AGENT_ANNOTATION, ZONES, ClusterState, pid_alive
from skiff.cli.netns import (
    API_HTTP_PORT,
    API_PORT,
    ETCD_PEER_PORT,
    ETCD_PORT,
    HEALTH_PORT,
    PREFIX_LEN,
    SUBNET,
    NetnsCluster,
    Topology,
    _create_bridge,
    _line,
    ns_exec,
    require_netns_support,
)
from skiff.cli.processes import (
    Process,
    StartError,
    find_etcd,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cli.topology import (
    APISERVERS,
    CLUSTER_TOKEN,
    ETCD_MEMBERS,
    REPLICAS,
    rotated,
    write_ha_kubeconfig,
)

ENV = {"SKIFF_LOG_FORMAT": "json"}


@dataclass
class NetnsHaCluster(NetnsCluster):
    """`NetnsCluster` with the --ha topology; stopped and partitioned the same way."""

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
            for name in self._hosts():
                topo.add_host(name)
            self.save()  # from here on, `skiff down` can find and delete the namespaces
            self._start_all(echo)
        except BaseException:
            self.stop()
            raise
        echo(f"{'netns':<22} {len(topo.hosts)} hosts on {SUBNET}.0/{PREFIX_LEN}, bridge "
             f"namespace {topo.bridge_netns}")
        return self.save()

    def _hosts(self) -> list[str]:
        return [*(f"etcd-{i}" for i in range(1, ETCD_MEMBERS + 1)),
                *(f"apiserver-{i}" for i in range(1, APISERVERS + 1)),
                *(f"{s}-{i}" for s in ("scheduler", "controller-manager")
                  for i in range(1, REPLICAS + 1)),
                *(f"node-{i}" for i in range(1, self.nodes + 1))]

    def _start_all(self, echo: Any) -> None:
        topo = self.topology
        assert topo is not None
        logs = self.data_dir / "logs"
        etcd_hosts = [topo.host(f"etcd-{i}") for i in range(1, ETCD_MEMBERS + 1)]
        api_hosts = [topo.host(f"apiserver-{i}") for i in range(1, APISERVERS + 1)]
        # The gateway first: every published socket exists before anything starts.
        etcd_pubs = [self._publish(h.name, h.netns, ETCD_PORT) for h in etcd_hosts]
        api_pubs = [self._publish(h.name, h.netns, API_PORT) for h in api_hosts]
        http_pubs = [self._publish(f"{h.name}-http", h.netns, API_HTTP_PORT)
                     for h in api_hosts]
        services = self._ha_services()
        health_pubs = {name: self._publish(name, topo.host(host).netns, HEALTH_PORT)
                       for name, host, _, _ in services}
        self.api = ",".join(p.address for p in api_pubs)
        self._start_gateway(logs, api_pubs[0].address, echo)

        initial = ",".join(f"{h.name}=http://{h.ip}:{ETCD_PEER_PORT}" for h in etcd_hosts)
        members = []
        for host, pub in zip(etcd_hosts, etcd_pubs, strict=True):
            argv = _member_argv(self.data_dir, host.name, host.ip, initial)
            proc = Process(host.name, ns_exec(host.netns, argv), logs / f"{host.name}.log")
            proc.start()  # all at once: a member is healthy only with a quorum
            members.append((proc, host, pub, argv))
        for proc, host, pub, argv in members:
            wait_etcd_healthy(proc, int(pub.address.rsplit(":", 1)[1]), timeout=60.0)
            self._record(proc, host.netns, f"http://{pub.address}", "", argv)
            echo(_line(proc.name, proc, f"http://{host.ip}:{ETCD_PORT}"))

        etcd_urls = [f"http://{h.ip}:{ETCD_PORT}" for h in etcd_hosts]
        config_dir = self.data_dir / "config"
        for i, (host, pub) in enumerate(zip(api_hosts, api_pubs, strict=True)):
            argv = [sys.executable, "-m", "skiff.apiserver",
                    "--etcd-servers", ",".join(rotated(etcd_urls, i)),
                    "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT),
                    "--http-port", str(API_HTTP_PORT),
                    "--advertise-address", host.ip,  # the kubernetes Service's endpoint
                    *self.config.flags("apiserver", config_dir),
                    *self.extra_args.get("apiserver", [])]
            proc = Process(host.name, ns_exec(host.netns, argv), logs / f"{host.name}.log",
                           env=ENV)
            proc.start()
            wait_grpc_healthy(proc, pub.address, timeout=60.0)
            self._record(proc, host.netns, pub.address, pub.address, argv)
            echo(_line(proc.name, proc, f"{host.ip}:{API_PORT}"))
        kubeconfig = write_ha_kubeconfig(self.data_dir,
                                         [f"http://{p.address}" for p in http_pubs])
        echo(f"{'kubectl':<22} {'':<12} export KUBECONFIG={kubeconfig}  (contexts skiff, "
             f"skiff-apiserver-2)")

        targets = [f"{h.ip}:{API_PORT}" for h in api_hosts]
        started = []
        for spread, (name, host_name, module, args) in enumerate(services):
            host = topo.host(host_name)
            argv = [sys.executable, "-m", module,
                    "--apiserver", ",".join(rotated(targets, spread)),
                    "--health-port", str(HEALTH_PORT), *args]
            proc = Process(name, ns_exec(host.netns, argv), logs / f"{name}.log", env=ENV)
            proc.start()
            started.append((proc, host, argv, health_pubs[name].address))
        for proc, host, argv, health in started:
            wait_grpc_healthy(proc, health, timeout=60.0)
            self._record(proc, host.netns, health, health, argv)
            echo(_line(proc.name, proc, f"{host.ip} ({host.netns})"))
        if self.fence_agent:
            self.start_fence_agent(echo=echo)

    def _start_gateway(self, logs: Any, api_address: str, echo: Any) -> None:
        """The one process in the root namespace that forwards each published port."""
        gateway = Process("gateway", [sys.executable, "-m", "skiff.cli.netns", "gateway",
                                      *[a for p in self.published for a in (
                                          "--route", f"{p.sock.fileno()}:{p.netns}:{p.port}")]],
                          logs / "gateway.log", env=ENV)
        gateway.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(gateway.log_path, "ab") as log:
            gateway.popen = subprocess.Popen(
                gateway.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **ENV}, start_new_session=True,
                pass_fds=[p.sock.fileno() for p in self.published])
        for pub in self.published:
            pub.sock.close()  # the gateway holds them now
        self._record(gateway, "", api_address, api_address, gateway.argv)
        echo(_line("gateway", gateway, f"{api_address} (API)"))

    def _ha_services(self) -> list[tuple[str, str, str, list[str]]]:
        """(component name = host name, host, module, args)."""
        config_dir = self.data_dir / "config"
        services: list[tuple[str, str, str, list[str]]] = []
        for i in range(1, REPLICAS + 1):
            services.append((f"scheduler-{i}", f"scheduler-{i}", "skiff.scheduler",
                             [*self.config.flags("scheduler", config_dir),
                              *self.extra_args.get("scheduler", []),
                              "--leader-elect-identity", f"scheduler-{i}"]))
        for i in range(1, REPLICAS + 1):
            name = f"controller-manager-{i}"
            services.append((name, name, "skiff.controller_manager",
                             [*self.config.flags("controllerManager", config_dir),
                              *self.extra_args.get("controller-manager", []),
                              "--leader-elect-identity", name]))
        for i in range(1, self.nodes + 1):
            node = f"node-{i}"
            labels = f"topology.kubernetes.io/zone={ZONES[(i - 1) % len(ZONES)]}"
            annotations = self.node_annotations.get(node, f"{FENCE_AGENT_ANNOTATION}=power")
            services.append((f"kubelet-{node}", node, "skiff.kubelet", [
                "--node-name", node, "--root-dir", str(self.data_dir / "nodes" / node),
                "--node-labels", labels, "--node-annotations", annotations,
                "--volume-root", str(self.data_dir / "volumes"),
                *self.config.flags("kubelet", config_dir),
                *self.extra_args.get("kubelet", [])]))
        return services


def _member_argv(data_dir: Any, name: str, ip: str, initial: str) -> list[str]:
    client, peer = f"http://{ip}:{ETCD_PORT}", f"http://{ip}:{ETCD_PEER_PORT}"
    return [find_etcd(), "--name", name, "--data-dir", str(data_dir / name),
            "--listen-client-urls", f"{client},http://127.0.0.1:{ETCD_PORT}",
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", initial, "--initial-cluster-state", "new",
            "--initial-cluster-token", CLUSTER_TOKEN, "--pre-vote",  # see etcd_process
            "--logger", "zap", "--log-outputs", "stderr",
            "--quota-backend-bytes", str(2 * 1024**3)]
