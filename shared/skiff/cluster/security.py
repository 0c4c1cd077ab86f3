"""How `skiff up` secures a cluster (SPEC AU1-AU4): certificates, flags and credentials.

`prepare(data_dir, insecure=...)` makes (or reuses) the PKI in `<data_dir>/pki` and answers
what every launcher needs: etcd's TLS files, the apiserver's TLS and etcd flags, each
component's credentials (as the environment its `ApiClient` reads), and the kubeconfig's
user. `--insecure` keeps the old plaintext mode and warns on every start. The kubeconfig
that hands the admin's credentials on is `kubeconfig`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.bootstraptoken import CLUSTER_INFO_PATH
from skiff.client.credentials import Credentials
from skiff.client.kubelet import ENV_KUBELET_TLS_CERT, ENV_KUBELET_TLS_KEY
from skiff.cluster.processes import EtcdTlsFiles

if TYPE_CHECKING:  # cryptography is imported only when certificates are made
    from skiff.pki import CertPair, ClusterPki

INSECURE_WARNING = ("WARNING: --insecure: plaintext, no authentication, no authorization; "
                    "anyone who can reach the ports can run anything as this user")


@dataclass(frozen=True)
class ClusterSecurity:
    pki: ClusterPki | None  # None: the insecure mode

    @property
    def secure(self) -> bool:
        return self.pki is not None

    @property
    def scheme(self) -> str:
        return "https" if self.pki is not None else "http"

    def etcd_tls(self) -> EtcdTlsFiles | None:
        p = self.pki
        if p is None:
            return None
        return EtcdTlsFiles(ca=p.etcd_ca, server_cert=p.etcd_server.cert,
                            server_key=p.etcd_server.key, peer_cert=p.etcd_peer.cert,
                            peer_key=p.etcd_peer.key,
                            client_cert=p.apiserver_etcd_client.cert,
                            client_key=p.apiserver_etcd_client.key)

    def apiserver_args(self) -> list[str]:
        if self.pki is None:
            return []
        args = [*self.pki.apiserver_tls_args(), *self.pki.etcd_tls_args(),
                # SPEC JN3: `skiff token`, and cluster-info for joining nodes
                "--enable-bootstrap-token-auth", "true",
                "--anonymous-auth-paths", CLUSTER_INFO_PATH]
        tokens = self.pki.directory / "tokens.csv"
        if tokens.exists():
            args += ["--token-auth-file", str(tokens)]
        return args

    def controller_manager_args(self) -> list[str]:
        """The cluster CA the csrsigning controller signs CSRs with (SPEC JN2)."""
        if self.pki is None:
            return []
        return ["--cluster-signing-cert-file", str(self.pki.ca),
                "--cluster-signing-key-file", str(self.pki.directory / "ca.key")]

    def _pair(self, component: str) -> CertPair | None:
        p = self.pki
        if p is None:
            return None
        if component.startswith("kubelet-"):
            return p.node(component.removeprefix("kubelet-"))
        if component.startswith("scheduler"):
            return p.scheduler
        if component.startswith("controller-manager"):
            return p.controller_manager
        if component.startswith("fence-agent"):
            return p.fence_agent
        return p.admin

    def credentials(self, component: str = "admin") -> Credentials:
        pair = self._pair(component)
        if self.pki is None or pair is None:
            return Credentials()
        return Credentials(ca_file=str(self.pki.ca), cert_file=str(pair.cert),
                           key_file=str(pair.key))

    def component_env(self, component: str) -> dict[str, str]:
        """The environment that gives `component` (scheduler, kubelet-node-1, ...) its
        identity: every service's ApiClient reads it (skiff.client.credentials); a
        kubelet also gets its serving certificate (its own port is mutual TLS)."""
        env = self.credentials(component).to_env()
        node = component.removeprefix("kubelet-")
        if self.pki is not None and component.startswith("kubelet-") \
                and node in self.pki.kubelet_serving:
            serving = self.pki.kubelet_serving[node]
            env.update({ENV_KUBELET_TLS_CERT: str(serving.cert),
                        ENV_KUBELET_TLS_KEY: str(serving.key)})
        return env

    def kubeconfig_user(self) -> dict[str, Any]:
        admin = self.credentials("admin")
        if not admin.secure:
            return {}
        return {"client-certificate": admin.cert_file, "client-key": admin.key_file}

    def kubeconfig_cluster(self, server: str) -> dict[str, Any]:
        if self.pki is None:
            return {"server": server}
        return {"server": server, "certificate-authority": str(self.pki.ca)}


def prepare(data_dir: Path, *, insecure: bool, nodes: Iterable[str],
            hosts: Iterable[str] = (), node_hosts: dict[str, list[str]] | None = None,
            echo: Any = print, service_cidr: str = "") -> ClusterSecurity:
    """`hosts`: the apiservers' and etcd members' extra addresses; `node_hosts`: each
    node's own addresses (its kubelet's serving certificate); `service_cidr`: the Service
    range whose first address (the `kubernetes` Service) the apiserver certificate names."""
    if insecure:
        echo(INSECURE_WARNING)
        return ClusterSecurity(None)
    from skiff.pki import ensure_pki

    return ClusterSecurity(ensure_pki(data_dir / "pki", nodes=nodes, hosts=hosts,
                                      node_hosts=node_hosts,
                                      **({"service_cidr": service_cidr}
                                         if service_cidr else {})))


__all__ = ["ClusterSecurity", "INSECURE_WARNING", "prepare"]
