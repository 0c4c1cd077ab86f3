"""How `skiff up` secures a cluster (SPEC AU1-AU4): certificates, flags and credentials.

`prepare(data_dir, insecure=...)` makes (or reuses) the PKI in `<data_dir>/pki` and answers
what every launcher needs: etcd's TLS files, the apiserver's TLS and etcd flags, each
component's credentials (as the environment its `ApiClient` reads), and the kubeconfig's
user. `--insecure` keeps the old plaintext mode and warns on every start. The CLI itself
finds its credentials in the kubeconfig `skiff up` wrote (`cli_credentials`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.cli.processes import EtcdTlsFiles
from skiff.client.credentials import ENV_CA, Credentials
from skiff.client.kubelet import ENV_KUBELET_TLS_CERT, ENV_KUBELET_TLS_KEY

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
        args = [*self.pki.apiserver_tls_args(), *self.pki.etcd_tls_args()]
        tokens = self.pki.directory / "tokens.csv"
        if tokens.exists():
            args += ["--token-auth-file", str(tokens)]
        return args

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


def cli_credentials(kubeconfig: Path) -> Credentials:
    """The current context's TLS files and client certificate from a kubeconfig (JSON or
    YAML), or none (plaintext) when it has no certificate authority."""
    import yaml

    try:
        config = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return Credentials()
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or ()}
    context = contexts.get(config.get("current-context"), {})
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or ()}
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or ()}
    cluster = clusters.get(context.get("cluster"), {})
    user = users.get(context.get("user"), {})

    def path(value: object) -> str:  # relative to the kubeconfig, as kubectl reads it
        return str(kubeconfig.parent / str(value)) if value else ""

    return Credentials(ca_file=path(cluster.get("certificate-authority")),
                       cert_file=path(user.get("client-certificate")),
                       key_file=path(user.get("client-key")),
                       token=str(user.get("token") or ""))


def use_kubeconfig_credentials(data_dir: Path, server: str = "") -> None:
    """Give this process (the CLI) the kubeconfig's credentials, unless its environment
    already names some: every ApiClient it makes then uses them. With an explicit
    `server` only when it is that data dir's cluster (`--server` may name another one)."""
    if os.environ.get(ENV_CA):
        return
    if server:
        from skiff.cli.localcluster import ClusterState
        from skiff.client.api import parse_targets

        state = ClusterState.load(data_dir)
        if state is None or not set(parse_targets(server)) <= set(parse_targets(state.api)):
            return
    creds = cli_credentials(data_dir / "kubeconfig")
    if creds.secure:
        os.environ.update(Credentials(ca_file=creds.ca_file, cert_file=creds.cert_file,
                                      key_file=creds.key_file).to_env())


__all__ = ["ClusterSecurity", "INSECURE_WARNING", "cli_credentials", "prepare",
           "use_kubeconfig_credentials"]
