"""SPEC AU10: over HTTPS, a client that opens a connection and sends
its request headers slowly, or not at all, is disconnected after the header timeout
(kube-apiserver's ReadHeaderTimeout, 32 s; `--http-read-header-timeout`, compressed here),
while a client that sends its request in time is served on the same port."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import pytest

from tests.integration.auth.conftest import SecureCluster, start_secure_cluster
from tests.integration.rawsocket import read_until_closed

pytestmark = pytest.mark.integration

HEADER_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    with start_secure_cluster(tmp_path_factory.mktemp("au10-https"), apiserver_args=(
            "--http-read-header-timeout", f"{HEADER_TIMEOUT}s")) as secure:
        yield secure


def _connect(cluster: SecureCluster) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    context.load_cert_chain(str(cluster.pki.admin.cert), str(cluster.pki.admin.key))
    raw = socket.create_connection(("127.0.0.1", cluster.http_port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_au10_https_slow_header_client_is_disconnected_after_the_header_timeout(
        cluster: SecureCluster) -> None:
    with _connect(cluster) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n")  # never ends
        data, seconds = read_until_closed(sock, 10 * HEADER_TIMEOUT)
    assert data == b"" and seconds < HEADER_TIMEOUT + 2.0, (data, seconds)


def test_au10_https_silent_client_is_disconnected_after_the_header_timeout(
        cluster: SecureCluster) -> None:
    with _connect(cluster) as sock:  # TLS done, then nothing
        data, seconds = read_until_closed(sock, 10 * HEADER_TIMEOUT)
    assert data == b"" and seconds < HEADER_TIMEOUT + 2.0, (data, seconds)


def test_au10_https_request_sent_in_time_is_served(cluster: SecureCluster) -> None:
    with _connect(cluster) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
