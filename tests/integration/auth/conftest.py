"""A real etcd + apiserver over TLS with the cluster PKI (SPEC AU1-AU4), and clients
holding the identities the tests need: the admin, a kubelet, plain users by certificate
and by bearer token, and nobody at all."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skiff.client import ApiClient, Credentials
from skiff.cluster.processes import (
    EtcdTlsFiles,
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.pki import CertPair, ClusterPki, ensure_pki, issue_client

TOKENS = 'token-bob,bob,1001,"developers"\n'
NODES = ("node-1", "node-2")


def etcd_tls_files(pki: ClusterPki) -> EtcdTlsFiles:
    return EtcdTlsFiles(ca=pki.etcd_ca, server_cert=pki.etcd_server.cert,
                        server_key=pki.etcd_server.key, peer_cert=pki.etcd_peer.cert,
                        peer_key=pki.etcd_peer.key,
                        client_cert=pki.apiserver_etcd_client.cert,
                        client_key=pki.apiserver_etcd_client.key)


@dataclass
class SecureCluster:
    root: Path
    pki: ClusterPki
    etcd: Process
    apiserver: Process
    etcd_port: int
    api_port: int
    http_port: int

    @property
    def api_target(self) -> str:
        return f"127.0.0.1:{self.api_port}"

    @property
    def https(self) -> str:
        return f"https://127.0.0.1:{self.http_port}"

    def credentials(self, pair: CertPair | None = None, *, token: str = "") -> Credentials:
        return Credentials(ca_file=str(self.pki.ca),
                           cert_file=str(pair.cert) if pair else "",
                           key_file=str(pair.key) if pair else "", token=token)

    def client(self, pair: CertPair | None = None, *, token: str = "") -> ApiClient:
        return ApiClient(self.api_target, retry_seconds=10,
                         credentials=self.credentials(pair, token=token))

    def user(self, name: str, *groups: str) -> CertPair:
        return issue_client(self.pki.directory, f"user-{name}", user=name, groups=groups)


@contextlib.contextmanager
def start_secure_cluster(root: Path, *, nodes: tuple[str, ...] = NODES,
                         apiserver_args: tuple[str, ...] = ()) -> Iterator[SecureCluster]:
    """A TLS etcd and apiserver with the cluster PKI in `root` (tokens from TOKENS), as
    `skiff up` secures them; `apiserver_args` add flags for one test module's needs."""
    pki = ensure_pki(root / "pki", nodes=nodes)
    tokens = root / "tokens.csv"
    tokens.write_text(TOKENS)
    etcd_port, peer_port, api_port, http_port = (free_port() for _ in range(4))
    tls = etcd_tls_files(pki)
    etcd = etcd_process(root, client_port=etcd_port, peer_port=peer_port, tls=tls)
    apiserver = service_process("apiserver", "skiff.apiserver", [
        "--etcd-servers", f"https://127.0.0.1:{etcd_port}", "--secure-port", str(api_port),
        "--http-port", str(http_port), "--etcd-retry-seconds", "2",
        *pki.apiserver_tls_args(), *pki.etcd_tls_args(), "--token-auth-file", str(tokens),
        # no controller-manager here to make each namespace's default ServiceAccount
        "--disable-admission-plugins", "ServiceAccount", *apiserver_args,
    ], log_dir=root / "logs", env={"SKIFF_LOG_FORMAT": "json"})
    try:
        etcd.start()
        wait_etcd_healthy(etcd, etcd_port, tls=tls)
        apiserver.start()
        cluster = SecureCluster(root, pki, etcd, apiserver, etcd_port, api_port, http_port)
        wait_grpc_healthy(apiserver, cluster.api_target,
                          credentials=cluster.credentials(pki.admin))
        yield cluster
    finally:
        apiserver.stop()
        etcd.stop()


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    with start_secure_cluster(tmp_path_factory.mktemp("secure")) as cluster:
        yield cluster


@pytest.fixture
async def admin(secure_cluster: SecureCluster) -> AsyncIterator[ApiClient]:
    async with secure_cluster.client(secure_cluster.pki.admin) as client:
        yield client
