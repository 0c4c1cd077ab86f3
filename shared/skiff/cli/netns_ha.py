"""`skiff up --ha --netns`: the replicated control plane (cli/topology.py) with every
replica on its own network host (cli/netns.py), so `skiff chaos partition` cuts inside the
control plane are real: `partition etcd-3` (a minority member), `partition apiserver-1
--from etcd` (an apiserver loses every etcd member), `partition controller-manager-1 --from
apiserver` (a leader isolated from every apiserver).

Hosts: etcd-1..3, apiserver-1..2, scheduler-1..2, controller-manager-1..2, node-1..N. The
etcd members peer over their host addresses (ports 2379/2380 on each host); each apiserver
lists all three members, its own first; every service gets both apiservers' host addresses.
The host reaches each etcd member, each apiserver (gRPC and HTTP) and each health port
through the gateway, as in a plain --netns cluster. Start-up, security (TLS by default)
and everything else are the plain cluster's (cli/netns.py); only the hosts and the
services differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiff.cli.netns import (
    API_HTTP_PORT,
    API_PORT,
    ETCD_PEER_PORT,
    ETCD_PORT,
    HEALTH_PORT,
    NetnsCluster,
)
from skiff.cli.topology import (
    APISERVERS,
    CLUSTER_TOKEN,
    ETCD_MEMBERS,
    REPLICAS,
    rotated,
    write_ha_kubeconfig,
)


@dataclass
class NetnsHaCluster(NetnsCluster):
    """`NetnsCluster` with the --ha topology; started, stopped and partitioned the same
    way."""

    def _hosts(self) -> list[str]:
        return [*(f"etcd-{i}" for i in range(1, ETCD_MEMBERS + 1)),
                *(f"apiserver-{i}" for i in range(1, APISERVERS + 1)),
                *(f"{s}-{i}" for s in ("scheduler", "controller-manager")
                  for i in range(1, REPLICAS + 1)),
                *(f"node-{i}" for i in range(1, self.nodes + 1))]

    def _start_all(self, echo: Any) -> None:
        topo = self.topology
        assert topo is not None
        etcd_hosts = [topo.host(f"etcd-{i}") for i in range(1, ETCD_MEMBERS + 1)]
        api_hosts = [topo.host(f"apiserver-{i}") for i in range(1, APISERVERS + 1)]
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
        initial = ",".join(f"{h.name}={scheme}://{h.ip}:{ETCD_PEER_PORT}" for h in etcd_hosts)
        self._start_etcd(list(zip(etcd_hosts, etcd_pubs, strict=True)), initial=initial,
                         cluster_token=CLUSTER_TOKEN, echo=echo, timeout=60.0)
        etcd_urls = [f"{scheme}://{h.ip}:{ETCD_PORT}" for h in etcd_hosts]
        for i, (host, pub) in enumerate(zip(api_hosts, api_pubs, strict=True)):
            # each apiserver lists every member, its own first
            self._start_apiserver(host, pub, rotated(etcd_urls, i), echo=echo, timeout=60.0)
        kubeconfig = write_ha_kubeconfig(self.data_dir,
                                         [f"{scheme}://{p.address}" for p in http_pubs],
                                         security=self.security)
        echo(f"{'kubectl':<22} {'':<12} export KUBECONFIG={kubeconfig}  (contexts skiff, "
             f"skiff-apiserver-2)")
        self._start_services(services, [f"{h.ip}:{API_PORT}" for h in api_hosts],
                             health_pubs, echo=echo, timeout=60.0)
        if self.fence_agent:
            self.start_fence_agent(echo=echo)

    def _services(self) -> list[tuple[str, str, str, list[str]]]:
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
        services += [self._kubelet_service(i, config_dir) for i in range(1, self.nodes + 1)]
        return services + self._control_plane_service()
