"""The kubeconfig `skiff up` writes for kubectl, and the credentials the CLI reads from it.

One cluster and context per apiserver (`skiff`, `skiff-apiserver-2`, ...), the current one
apiserver-1's; with a PKI each carries the CA, and the user the admin's client certificate
(AU1). The CLI finds its credentials in that kubeconfig (`use_kubeconfig_credentials`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from skiff.client.api import parse_targets
from skiff.client.credentials import ENV_CA, Credentials
from skiff.cluster.security import ClusterSecurity
from skiff.cluster.state import ClusterState

__all__ = ["cli_credentials", "use_kubeconfig_credentials", "write_kubeconfig"]


def write_kubeconfig(data_dir: Path, *servers: str,
                     security: ClusterSecurity | None = None) -> Path:
    """A kubeconfig for the real kubectl, pointing at the apiservers' HTTP fronts: one
    cluster and context per server; the current context (`skiff`) is the first's."""
    sec = security or ClusterSecurity(None)
    names = ["skiff"] + [f"skiff-apiserver-{i}" for i in range(2, len(servers) + 1)]
    path = data_dir / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "skiff",
        "clusters": [{"name": n, "cluster": sec.kubeconfig_cluster(s)}
                     for n, s in zip(names, servers, strict=True)],
        "users": [{"name": "skiff", "user": sec.kubeconfig_user()}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "skiff",
                                             "namespace": "default"}} for n in names],
    }, indent=2))
    return path


def cli_credentials(kubeconfig: Path) -> Credentials:
    """The current context's TLS files and client certificate from a kubeconfig (JSON or
    YAML), or none (plaintext) when it has no certificate authority."""
    return Credentials.from_kubeconfig(kubeconfig)


def use_kubeconfig_credentials(data_dir: Path, server: str = "") -> None:
    """Give this process (the CLI) the kubeconfig's credentials, unless its environment
    already names some: every ApiClient it makes then uses them. With an explicit
    `server` only when it is that data dir's cluster (`--server` may name another one)."""
    if os.environ.get(ENV_CA):
        return
    if server:
        state = ClusterState.load(data_dir)
        if state is None or not set(parse_targets(server)) <= set(parse_targets(state.api)):
            return
    creds = cli_credentials(data_dir / "kubeconfig")
    if creds.secure:
        os.environ.update(Credentials(ca_file=creds.ca_file, cert_file=creds.cert_file,
                                      key_file=creds.key_file).to_env())
