"""The joining node's TLS bootstrap (SPEC JN3), as `kubeadm join` and the kubelet's
`--bootstrap-kubeconfig` do it together: discovery (skiff.join.discovery), then, as the
bootstrap token's user, a refusal when a Node of that name already exists, a client
certificate for `system:node:<name>` by CSR, and only then the node's files: the CA, the
key (0600) and certificate, and a kubeconfig naming them. A refusal or a timeout leaves the
data dir as it was. A node that holds valid credentials already does not come here
(skiff.join.identity); one whose credentials are stale does, as a newcomer.
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from skiff.api import ApiError, Reason
from skiff.api.groups.certificates import KUBE_APISERVER_CLIENT_KUBELET
from skiff.bootstraptoken import Token
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.join.certificates import (
    CLIENT_USAGES,
    CertificateRequestError,
    KeyPair,
    build_request,
    new_key,
    request_certificate,
    write_pair,
)
from skiff.join.discovery import ClusterInfo, JoinError, discover, split_address

__all__ = ["NodeFiles", "bootstrap_node", "local_address"]


@dataclass(frozen=True)
class NodeFiles:
    """Where a joined node keeps its identity, below its data dir."""

    data_dir: Path

    @property
    def ca_file(self) -> Path:
        return self.data_dir / "pki" / "ca.crt"

    @property
    def client(self) -> KeyPair:
        return KeyPair(self.data_dir / "pki" / "kubelet-client.crt",
                       self.data_dir / "pki" / "kubelet-client.key")

    @property
    def serving(self) -> KeyPair:
        return KeyPair(self.data_dir / "pki" / "kubelet.crt",
                       self.data_dir / "pki" / "kubelet.key")

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubelet.kubeconfig"

    def credentials(self) -> Credentials:
        return Credentials(ca_file=str(self.ca_file), cert_file=str(self.client.cert_file),
                           key_file=str(self.client.key_file))


def local_address(address: str) -> str:
    """This machine's address on the route to the API (the Node's InternalIP)."""
    host, port = split_address(address)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((socket.gethostbyname(host), port))
        except OSError as err:
            raise JoinError(f"no route to the API at {address}: {err.strerror or err}") \
                from None
        return str(probe.getsockname()[0])


def _existing_node_message(node: dict[str, object], name: str) -> str:
    status = node.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    ready = next((c for c in conditions or [] if isinstance(c, dict)
                  and c.get("type") == "Ready"), {})
    state = "Ready" if ready.get("status") == "True" else "NotReady"
    return (f'a Node with name "{name}" and status "{state}" already exists in the cluster. '
            "You must delete the existing Node or change the name of this new joining Node "
            "(--node-name)")


async def _check_name_free(api: ApiClient, name: str, *, stale: str) -> None:
    try:
        node = await api.get("nodes", name)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return
        raise
    message = _existing_node_message(node, name)
    if stale:  # the node's own credentials lapsed: a token alone must not take the name
        message += (f". This data dir's credentials for it are no longer valid ({stale}); "
                    f"delete the Node (`kubectl delete node {name}`) to join again under "
                    "that name")
    raise JoinError(message)


def _write_kubeconfig(files: NodeFiles, info: ClusterInfo, node_name: str) -> None:
    """The node's kubeconfig (paths relative to it): cluster-info's HTTPS server, the CA,
    the node's certificate; for `kubectl --kubeconfig` as the node."""
    base = files.data_dir
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "default",
        "clusters": [{"name": "default", "cluster": {
            "server": info.server or f"https://{info.address}",
            "certificate-authority": str(files.ca_file.relative_to(base))}}],
        "users": [{"name": f"system:node:{node_name}", "user": {
            "client-certificate": str(files.client.cert_file.relative_to(base)),
            "client-key": str(files.client.key_file.relative_to(base))}}],
        "contexts": [{"name": "default", "context": {
            "cluster": "default", "user": f"system:node:{node_name}"}}]}
    tmp = files.kubeconfig.with_name(f".{files.kubeconfig.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    os.replace(tmp, files.kubeconfig)


async def bootstrap_node(address: str, *, token: Token, ca_hashes: list[str],
                         node_name: str, files: NodeFiles, timeout: float = 10.0,
                         csr_timeout: float = 60.0, expiration_seconds: int | None = None,
                         stale: str = "") -> tuple[ClusterInfo, str]:
    """Discovery, the name check and the client certificate: (cluster info, CSR name).
    JoinError (with the user's message) when any step refuses; nothing is written then.
    `stale`: why the credentials already in `files` are unusable (skiff.join.identity);
    they are replaced, and the old serving pair removed (the kubelet asks for a new one)."""
    if files.client.cert_file.exists() and not stale:
        raise JoinError(f"{files.client.cert_file} already exists: this data dir holds a "
                        "joined node (use another --data-dir, or remove it to join again)")
    info = await discover(address, token=token, ca_hashes=ca_hashes, timeout=timeout)
    key = new_key()
    with tempfile.TemporaryDirectory(prefix="skiff-join-") as tmp:
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_bytes(info.ca_pem)
        try:
            async with ApiClient(address, timeout=timeout, retry_seconds=timeout,
                                 user_agent="skiff-join", credentials=Credentials(
                                     ca_file=str(ca_file), token=str(token))) as api:
                await _check_name_free(api, node_name, stale=stale)
                csr_name, cert_pem = await request_certificate(
                    api, name="node-csr-", signer=KUBE_APISERVER_CLIENT_KUBELET,
                    request_pem=build_request(key, node_name=node_name),
                    usages=CLIENT_USAGES, timeout=csr_timeout,
                    expiration_seconds=expiration_seconds)
        except CertificateRequestError as err:
            raise JoinError(str(err)) from None
        except ApiError as err:
            if err.reason == Reason.UNAUTHORIZED:
                raise JoinError(f"the bootstrap token {token.id!r} was refused "
                                "(Unauthorized): it is expired or deleted (create a new one "
                                "with `skiff token create`)") from None
            raise JoinError(f"the API refused the bootstrap token {token.id!r}: "
                            f"{err.message}") from None
    files.ca_file.parent.mkdir(parents=True, exist_ok=True)
    files.ca_file.write_bytes(info.ca_pem)
    write_pair(files.client, cert_pem=cert_pem, key=key)
    _write_kubeconfig(files, info, node_name)
    if stale:
        for path in (files.serving.cert_file, files.serving.key_file):
            path.unlink(missing_ok=True)
    return info, csr_name
