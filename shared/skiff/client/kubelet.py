"""How a client reaches a kubelet's own gRPC port (logs, exec, metrics; SPEC AU1).

In a secure cluster the kubelet serves that port with mutual TLS (its serving certificate
from the cluster CA names the node and its addresses), and only the apiserver's
`kube-apiserver-kubelet-client` identity and `system:masters` may use it, as in
Kubernetes. `kubelet_channel(target, credentials)` opens the channel: TLS with the
caller's certificate when it has credentials, plaintext for `--insecure` clusters. The
apiserver passes its kubelet client certificate; the CLI (`skiff logs`) its own, from the
kubeconfig, i.e. the environment (`Credentials.from_env()`).
"""

from __future__ import annotations

import grpc

from skiff.client.credentials import Credentials

__all__ = ["ENV_KUBELET_TLS_CERT", "ENV_KUBELET_TLS_KEY", "KubeletTarget", "kubelet_channel"]

# The kubelet's serving certificate and key (the CA is the client's `SKIFF_CA_FILE`).
ENV_KUBELET_TLS_CERT = "SKIFF_KUBELET_TLS_CERT_FILE"
ENV_KUBELET_TLS_KEY = "SKIFF_KUBELET_TLS_KEY_FILE"


class KubeletTarget(str):
    """host:port of a kubelet, knowing its node's name: the TLS handshake checks that the
    kubelet's serving certificate names that node (which it always does), whatever address
    it is dialled at (a compose node's address is the engine's to choose)."""

    node: str

    def __new__(cls, address: str, node: str) -> KubeletTarget:
        target = super().__new__(cls, address)
        target.node = node
        return target


def kubelet_channel(target: str, credentials: Credentials | None = None) -> grpc.aio.Channel:
    """A channel to the kubelet at `target` (host:port, or a `KubeletTarget`); `None`:
    this process's own credentials (its environment)."""
    creds = Credentials.from_env() if credentials is None else credentials
    if not creds.secure:
        return grpc.aio.insecure_channel(target)
    options = ([("grpc.ssl_target_name_override", target.node)]
               if isinstance(target, KubeletTarget) and target.node else [])
    return grpc.aio.secure_channel(str(target), creds.grpc_credentials(), options=options)
