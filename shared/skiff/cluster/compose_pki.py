"""The compose cluster's certificates (SPEC AU1-AU4) and the nodes' join token (SPEC JN3):
run once by compose.yaml's one-shot `pki` service, before etcd and the apiservers start.

    python3 -m skiff.cluster.compose_pki DIR \\
        --hosts apiserver,apiserver-2,etcd,etcd-2,etcd-3 --server https://127.0.0.1:8080

`skiff.pki.ensure_pki` makes the CA and every control-plane certificate in `DIR/ca` (kept
there, mounted nowhere); each component then gets a directory of its own holding only what
it needs — the CA certificate, its own client certificate and key, for the servers their
serving files, for the controller-manager the CA key it signs CSRs with — which compose
mounts read-only at /etc/skiff/pki of that component's container only. No node
certificate is made: the nodes join as kubeadm's do (`skiff join`), with the bootstrap token
and the CA's `sha256:` hash in `DIR/join` (the only thing a node container mounts), and get
their certificates by CSR. `DIR/token` is what the one-shot `bootstrap-token` service
creates the token's Secret with once the apiserver is up: the admin's credentials and a
kubeconfig naming the in-network HTTPS API (cluster-info publishes that server). Existing
files are kept (a restart of the project reuses them, the token included).
`DIR/kubeconfig` is the admin's, with paths relative to itself (kubectl and the official
client resolve them so), for `kubectl --kubeconfig DIR/kubeconfig` on the host.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from skiff.bootstraptoken import TokenError, ca_cert_hash, generate_token, parse_token
from skiff.pki import CertPair, ClusterPki, ensure_pki, issue_client

# The identity of the apiserver container's own health probe: a certificate the cluster CA
# signed (gRPC is mutual TLS), in no group and bound to no role, so it can do nothing else.
PROBE_USER = "system:skiff:apiserver-probe"
SERVICE_ACCOUNT_KEY = "service-account.key"
# The HTTPS API as the containers reach it: cluster-info's server (a joining node's kubeconfig)
IN_NETWORK_SERVER = "https://apiserver:8080"


def _split(value: str) -> list[str]:
    return [v for v in (s.strip() for s in value.split(",")) if v]


def _copy(files: dict[str, Path], directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    for name, source in files.items():
        target = directory / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
        os.chmod(target, 0o600)


def _client(ca: Path, pair: CertPair) -> dict[str, Path]:
    return {"ca.crt": ca, "client.crt": pair.cert, "client.key": pair.key}


def _service_account_key(path: Path) -> Path:
    """The RSA key every apiserver signs ServiceAccount tokens with (one for all of them)."""
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return path


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def join_files(directory: Path, ca: Path) -> str:
    """`directory/token` (kept while it is a well-formed token, else a new random one) and
    `directory/ca-cert-hash`, 0600 in a 0700 directory: what a node needs to join. The
    token, which `skiff join` reads from the file."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    path = directory / "token"
    try:
        token = str(parse_token(path.read_text().strip()))
    except (OSError, TokenError):
        token = str(generate_token())
    _write_private(path, token + "\n")
    _write_private(directory / "ca-cert-hash", ca_cert_hash(ca.read_bytes()) + "\n")
    return token


def kubeconfig(server: str, *, user_dir: str = "admin") -> dict[str, object]:
    """The admin's kubeconfig; file paths relative to the kubeconfig's own directory."""
    prefix = f"{user_dir}/" if user_dir else ""
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "skiff-compose",
        "clusters": [{"name": "skiff-compose", "cluster": {
            "server": server, "certificate-authority": f"{prefix}ca.crt"}}],
        "users": [{"name": "admin", "user": {"client-certificate": f"{prefix}client.crt",
                                             "client-key": f"{prefix}client.key"}}],
        "contexts": [{"name": "skiff-compose",
                      "context": {"cluster": "skiff-compose", "user": "admin"}}],
    }


def _write_kubeconfig(path: Path, config: dict[str, object]) -> None:
    _write_private(path, json.dumps(config, indent=2))  # JSON is YAML


def make(directory: Path, *, hosts: Iterable[str], server: str) -> ClusterPki:
    """Every component's directory under `directory`, `directory/join` and
    `directory/kubeconfig`."""
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / "ca"
    pki = ensure_pki(private, hosts=hosts)
    probe = issue_client(private, "apiserver-probe", user=PROBE_USER)
    sa_key = _service_account_key(private / SERVICE_ACCOUNT_KEY)
    _copy({"ca.crt": pki.etcd_ca, "server.crt": pki.etcd_server.cert,
           "server.key": pki.etcd_server.key, "peer.crt": pki.etcd_peer.cert,
           "peer.key": pki.etcd_peer.key}, directory / "etcd")
    _copy({**_client(pki.ca, probe), "tls.crt": pki.apiserver.cert,
           "tls.key": pki.apiserver.key, "etcd-ca.crt": pki.etcd_ca,
           "etcd-client.crt": pki.apiserver_etcd_client.cert,
           "etcd-client.key": pki.apiserver_etcd_client.key,
           "kubelet-client.crt": pki.apiserver_kubelet_client.cert,
           "kubelet-client.key": pki.apiserver_kubelet_client.key,
           SERVICE_ACCOUNT_KEY: sa_key}, directory / "apiserver")
    _copy(_client(pki.ca, pki.scheduler), directory / "scheduler")
    # the csrsigning controller signs the nodes' CSRs with the cluster CA (as kubeadm's
    # controller-manager holds ca.key)
    _copy({**_client(pki.ca, pki.controller_manager), "ca.key": private / "ca.key"},
          directory / "controller-manager")
    _copy(_client(pki.ca, pki.fence_agent), directory / "fence-agent")
    _copy(_client(pki.ca, pki.admin), directory / "admin")
    _copy(_client(pki.ca, pki.admin), directory / "token")
    _write_kubeconfig(directory / "token" / "kubeconfig",
                      kubeconfig(IN_NETWORK_SERVER, user_dir=""))
    join_files(directory / "join", pki.ca)
    _write_kubeconfig(directory / "kubeconfig", kubeconfig(server))
    return pki


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m skiff.cluster.compose_pki",
        description="Make the compose cluster's CA, certificates and admin kubeconfig.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--hosts", default="apiserver,etcd",
                        help="comma-separated service names the apiservers and etcd members "
                             "are dialled at (SANs; loopback is always included)")
    parser.add_argument("--server", default="https://127.0.0.1:8080",
                        help="the kubeconfig's server (the published HTTPS port)")
    args = parser.parse_args(argv)
    try:
        make(args.directory, hosts=_split(args.hosts), server=args.server)
    except OSError as err:
        print(f"compose_pki: cannot write the certificates in {args.directory}: "
              f"{err.strerror or err}", file=sys.stderr)
        return 1
    print(f"compose_pki: certificates, join token and kubeconfig in {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
