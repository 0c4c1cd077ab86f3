"""The compose cluster's certificates (SPEC AU1-AU4): run once by compose.yaml's
one-shot `pki` service, before etcd and the apiservers start.

    python3 -m skiff.cluster.compose_pki DIR --nodes node-1,node-2,node-3 \\
        --hosts apiserver,apiserver-2,etcd,etcd-2,etcd-3 --server https://127.0.0.1:8080

`skiff.pki.ensure_pki` makes the CA and every certificate in `DIR/ca` (kept there, mounted
nowhere); each component then gets a directory of its own holding only what it needs —
the CA certificate, its own client certificate and key, and for the servers their serving
files — which compose mounts read-only at /etc/skiff/pki of that component's container only,
so a node's container never sees another node's key, the admin key or a CA key. Existing
files are kept (a restart of the project reuses them). `DIR/kubeconfig` is the admin's,
with paths relative to itself (kubectl and the official client resolve them so), for
`kubectl --kubeconfig DIR/kubeconfig` on the host.
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

from skiff.pki import CertPair, ClusterPki, ensure_pki, issue_client

# The identity of the apiserver container's own health probe: a certificate the cluster CA
# signed (gRPC is mutual TLS), in no group and bound to no role, so it can do nothing else.
PROBE_USER = "system:skiff:apiserver-probe"
SERVICE_ACCOUNT_KEY = "service-account.key"


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


def kubeconfig(server: str) -> dict[str, object]:
    """The admin's kubeconfig; file paths relative to the kubeconfig's own directory."""
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "skiff-compose",
        "clusters": [{"name": "skiff-compose", "cluster": {
            "server": server, "certificate-authority": "admin/ca.crt"}}],
        "users": [{"name": "admin", "user": {"client-certificate": "admin/client.crt",
                                             "client-key": "admin/client.key"}}],
        "contexts": [{"name": "skiff-compose",
                      "context": {"cluster": "skiff-compose", "user": "admin"}}],
    }


def make(directory: Path, *, nodes: Iterable[str], hosts: Iterable[str],
         server: str) -> ClusterPki:
    """Every component's directory under `directory`, and `directory/kubeconfig`."""
    nodes = list(nodes)
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / "ca"
    pki = ensure_pki(private, nodes=nodes, hosts=hosts)
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
    _copy(_client(pki.ca, pki.controller_manager), directory / "controller-manager")
    _copy(_client(pki.ca, pki.fence_agent), directory / "fence-agent")
    _copy(_client(pki.ca, pki.admin), directory / "admin")
    for node in nodes:  # a kubelet's client identity and its own port's serving pair
        _copy({**_client(pki.ca, pki.node(node)),
               "serving.crt": pki.kubelet_serving[node].cert,
               "serving.key": pki.kubelet_serving[node].key}, directory / node)
    target = directory / "kubeconfig"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(kubeconfig(server), f, indent=2)  # JSON is YAML
    return pki


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m skiff.cluster.compose_pki",
        description="Make the compose cluster's CA, certificates and admin kubeconfig.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--nodes", default="node-1,node-2,node-3",
                        help="comma-separated node names (one kubelet certificate each)")
    parser.add_argument("--hosts", default="apiserver,etcd",
                        help="comma-separated service names the apiservers and etcd members "
                             "are dialled at (SANs; loopback is always included)")
    parser.add_argument("--server", default="https://127.0.0.1:8080",
                        help="the kubeconfig's server (the published HTTPS port)")
    args = parser.parse_args(argv)
    try:
        make(args.directory, nodes=_split(args.nodes), hosts=_split(args.hosts),
             server=args.server)
    except OSError as err:
        print(f"compose_pki: cannot write the certificates in {args.directory}: "
              f"{err.strerror or err}", file=sys.stderr)
        return 1
    print(f"compose_pki: certificates and kubeconfig in {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
