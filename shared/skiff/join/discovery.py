"""Token discovery, as kubeadm's `discovery/token`: learn the cluster's CA from only the
API address, a bootstrap token and the CA's pinned hash.

1. Connect to the address trusting whatever certificate it presents (the one a first TLS
   handshake shows is the trust anchor of that connection; nothing is sent that a man in
   the middle could use: the read is anonymous, the token never leaves).
2. Read the `cluster-info` ConfigMap in kube-public; its `jws-kubeconfig-<token id>` must be
   a detached JWS of its kubeconfig made with the token secret (only the cluster knows it).
3. The kubeconfig's CA must hash to one of the `--discovery-token-ca-cert-hash` pins.
4. Only then trust that CA and read cluster-info again over verified TLS; it must be the
   same.

The JWS is waited for (up to the timeout): the bootstrapsigner adds it a moment after a
token is made. The address is the gRPC API the kubelet dials afterwards (the apiserver
answers the anonymous `Get` of cluster-info there as on HTTPS), so one address is all a
node needs; cluster-info's own `server` (the HTTPS API) only goes into the node's
kubeconfig for kubectl.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from skiff.api import ApiError, Reason
from skiff.bootstraptoken import (
    CLUSTER_INFO,
    CLUSTER_INFO_NAMESPACE,
    KUBECONFIG_KEY,
    Token,
    TokenError,
    ca_cert_hash,
    ca_matches,
    signatures_of,
    verify_detached,
)
from skiff.client import ApiClient
from skiff.client.credentials import Credentials

__all__ = ["ClusterInfo", "JoinError", "discover", "split_address"]

_RETRY_SECONDS = 0.5


class JoinError(Exception):
    """`skiff join` cannot go on; the text is what the user reads."""


@dataclass(frozen=True)
class ClusterInfo:
    address: str  # the gRPC API address the node dials (the one it was given)
    ca_pem: bytes
    server: str  # cluster-info's kubeconfig server (the HTTPS API, for kubectl)


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.removeprefix("https://").rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise JoinError(f"invalid API address {address!r}: expected <host>:<port>")
    return host.strip("[]"), int(port)


def presented_certificate(address: str, *, timeout: float) -> bytes:
    """The certificate the server at `address` presents, not verified (step 1)."""
    host, port = split_address(address)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as err:
        raise JoinError(f"cannot reach the API at {address}: "
                        f"{getattr(err, 'strerror', None) or err}") from None
    if not der:
        raise JoinError(f"the API at {address} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der).encode()


async def _read_cluster_info(address: str, trust_pem: bytes, *, timeout: float) -> dict[str, str]:
    """cluster-info's data, read anonymously over TLS trusting `trust_pem`."""
    with tempfile.TemporaryDirectory(prefix="skiff-join-") as tmp:
        ca_file = Path(tmp) / "trust.crt"
        ca_file.write_bytes(trust_pem)
        try:
            async with ApiClient(address, credentials=Credentials(ca_file=str(ca_file)),
                                 timeout=timeout, retry_seconds=timeout,
                                 user_agent="skiff-join") as api:
                found = await api.get("configmaps", CLUSTER_INFO, CLUSTER_INFO_NAMESPACE)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                raise JoinError(f"there is no {CLUSTER_INFO} ConfigMap in "
                                f"{CLUSTER_INFO_NAMESPACE} at {address} (create a token "
                                "with `skiff token create` on the control plane)") from None
            raise JoinError(f"cannot read the {CLUSTER_INFO} ConfigMap at {address}: "
                            f"{err.message}") from None
    data = found.get("data") or {}
    return {str(k): str(v) for k, v in data.items()}


def _ca_of(kubeconfig: str) -> tuple[bytes, str]:
    try:
        config = yaml.safe_load(kubeconfig) or {}
        cluster = (config.get("clusters") or [{}])[0].get("cluster") or {}
        ca = base64.b64decode(cluster["certificate-authority-data"], validate=True)
    except (yaml.YAMLError, KeyError, ValueError, AttributeError, TypeError):
        raise JoinError(f"the {CLUSTER_INFO} kubeconfig names no certificate "
                        "authority") from None
    return ca, str(cluster.get("server") or "")


async def discover(address: str, *, token: Token, ca_hashes: list[str],
                   timeout: float = 10.0) -> ClusterInfo:
    """The cluster's CA, trusted only once signed by `token` and matching a pin."""
    if not ca_hashes:
        raise JoinError("--discovery-token-ca-cert-hash is required (run `skiff token "
                        "create --print-join-command` on the control plane for the line)")
    leaf = presented_certificate(address, timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:  # the bootstrapsigner signs a new token's JWS a moment after it is made
        data = await _read_cluster_info(address, leaf, timeout=timeout)
        signature = signatures_of(data).get(token.id)
        if signature is not None or time.monotonic() >= deadline:
            break
        await asyncio.sleep(_RETRY_SECONDS)
    kubeconfig = data.get(KUBECONFIG_KEY, "")
    if signature is None:
        raise JoinError(f"there is no JWS signed token in the {CLUSTER_INFO} ConfigMap for "
                        f"token ID {token.id!r}: the token is expired, deleted or not "
                        "usable for signing (create a new one with `skiff token create`)")
    if not verify_detached(signature, kubeconfig, token):
        raise JoinError(f"failed to verify JWS signature of received cluster info object, "
                        f"can't trust this API Server (token {token.id!r})")
    ca_pem, server = _ca_of(kubeconfig)
    try:
        matches = ca_matches(ca_pem, ca_hashes)
    except TokenError as err:
        raise JoinError(str(err)) from None
    except ValueError:
        raise JoinError(f"the {CLUSTER_INFO} certificate authority is not a PEM "
                        "certificate") from None
    if not matches:
        raise JoinError(f"cluster CA found in cluster-info ConfigMap is invalid: none of "
                        f"the public keys \"{ca_cert_hash(ca_pem)}\" are pinned "
                        f"(--discovery-token-ca-cert-hash {', '.join(ca_hashes)})")
    # trusted now: read it again over verified TLS, as kubeadm does
    again = await _read_cluster_info(address, ca_pem, timeout=timeout)
    if again.get(KUBECONFIG_KEY) != kubeconfig:
        raise JoinError(f"the {CLUSTER_INFO} read over verified TLS differs from the one "
                        "first received; try again")
    return ClusterInfo(address=address, ca_pem=ca_pem, server=server)
