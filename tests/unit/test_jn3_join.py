"""SPEC JN2/JN3, the pure parts of joining: the kubelet's CSRs keep their signers' rules,
the rotation deadline, the pair written so a reader never takes a key without its
certificate (and a client swaps to a renewed one), the serving-CSR approver's names check,
the anonymous gRPC reads the apiserver allows, and the joined kubelet's command line."""

from __future__ import annotations

import datetime
import random
from pathlib import Path

import jwt
import pytest
from cryptography import x509

from skiff.api.groups.certificates import KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING
from skiff.apiserver.endpoints.guard import anonymous_gets
from skiff.bootstraptoken import CLUSTER_INFO_PATH
from skiff.certtoken import CertificateTokens
from skiff.cli.join import kubelet_command
from skiff.client.kubelet import ENV_KUBELET_TLS_CERT
from skiff.controller_manager.certificates.signing import (
    Issuer,
    check_signer_rules,
    node_name,
    serving_names_allowed,
    sign,
)
from skiff.join.certificates import (
    CLIENT_USAGES,
    SERVING_USAGES,
    KeyPair,
    build_request,
    key_pem,
    new_key,
    rotation_deadline,
    write_pair,
)
from skiff.join.discovery import JoinError, split_address
from skiff.join.node import NodeFiles
from skiff.pki import ensure_pki


def _issuer(tmp_path: Path) -> Issuer:
    pki = ensure_pki(tmp_path / "pki")
    return Issuer.load(cert_pem=pki.ca.read_bytes(),
                       key_pem=(pki.directory / "ca.key").read_bytes())


def _signed(issuer: Issuer, pem: bytes, usages: list[str], days: float = 1) -> bytes:
    return sign(issuer=issuer, csr=x509.load_pem_x509_csr(pem), usages=usages,
                valid_for=datetime.timedelta(days=days))


def test_jn2_the_kubelets_csrs_keep_their_signers_rules() -> None:
    key = new_key()
    client = x509.load_pem_x509_csr(build_request(key, node_name="joined-1"))
    check_signer_rules(signer=KUBE_APISERVER_CLIENT_KUBELET, csr=client, usages=CLIENT_USAGES)
    assert node_name(client) == "joined-1"
    serving = x509.load_pem_x509_csr(build_request(key, node_name="joined-1",
                                                   addresses=["10.231.0.109", "joined-1"]))
    check_signer_rules(signer=KUBELET_SERVING, csr=serving, usages=SERVING_USAGES)


def test_jn2_rotation_deadline_is_a_jittered_70_to_90_percent_or_the_given_share(
        tmp_path: Path) -> None:
    cert = x509.load_pem_x509_certificate(_signed(
        _issuer(tmp_path), build_request(new_key(), node_name="n"), CLIENT_USAGES, days=10))
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    rand = random.Random(1)
    for _ in range(50):
        deadline = rotation_deadline(cert, rand=rand)
        assert start + (end - start) * 0.7 <= deadline <= start + (end - start) * 0.9
    assert rotation_deadline(cert, fraction=0.5) == start + (end - start) * 0.5


def test_jn2_a_client_takes_its_renewed_certificate_at_the_next_call(tmp_path: Path) -> None:
    issuer = _issuer(tmp_path)
    pair = KeyPair(tmp_path / "node" / "client.crt", tmp_path / "node" / "client.key")
    first_key = new_key()
    write_pair(pair, cert_pem=_signed(issuer, build_request(first_key, node_name="n"),
                                      CLIENT_USAGES), key=first_key)
    assert pair.key_file.stat().st_mode & 0o777 == 0o600
    tokens = CertificateTokens(pair.cert_file, pair.key_file)
    before = jwt.get_unverified_header(tokens.token())["x5c"]
    # a key alone (the certificate not yet replaced) is not taken
    pair.key_file.write_bytes(key_pem(new_key()))
    assert jwt.get_unverified_header(tokens.token())["x5c"] == before
    second_key = new_key()
    write_pair(pair, cert_pem=_signed(issuer, build_request(second_key, node_name="n"),
                                      CLIENT_USAGES), key=second_key)
    assert jwt.get_unverified_header(tokens.token())["x5c"] != before


def test_jn2_a_serving_csr_may_name_only_the_nodes_own_addresses() -> None:
    node = {"metadata": {"name": "joined-1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.231.0.109"},
                                     {"type": "Hostname", "address": "joined-1"}]}}

    def csr(*names: str) -> x509.CertificateSigningRequest:
        return x509.load_pem_x509_csr(build_request(new_key(), node_name="joined-1",
                                                    addresses=list(names)))

    assert serving_names_allowed(csr("10.231.0.109", "joined-1"), node)
    assert not serving_names_allowed(csr("10.231.0.109", "10.231.0.11"), node)
    assert not serving_names_allowed(csr("kubernetes.default.svc"), node)
    assert not serving_names_allowed(
        x509.load_pem_x509_csr(build_request(new_key(), node_name="joined-1")), node)


def test_jn3_only_object_paths_among_anonymous_paths_become_anonymous_grpc_gets() -> None:
    assert anonymous_gets(frozenset({CLUSTER_INFO_PATH, "/healthz", "/api/v1/nodes"})) == {
        ("configmaps", "kube-public", "cluster-info")}


def test_jn3_the_joined_kubelet_runs_with_its_own_identity_and_ports(tmp_path: Path) -> None:
    files = NodeFiles(tmp_path / "joined" / "n")
    argv, env = kubelet_command(address="10.0.0.1:6443", node_name="n", node_ip="10.0.0.9",
                                files=files, extra=["--sandbox=none"])
    assert argv[argv.index("--apiserver") + 1] == "10.0.0.1:6443"
    assert argv[argv.index("--port") + 1] == "10250"
    assert argv[argv.index("--server-tls-bootstrap") + 1] == "true"
    assert argv[-1] == "--sandbox=none"
    assert env["SKIFF_CLIENT_CERT_FILE"] == str(files.client.cert_file)
    assert env["SKIFF_CA_FILE"] == str(files.ca_file)
    assert env[ENV_KUBELET_TLS_CERT] == str(files.serving.cert_file)


def test_jn3_an_api_address_is_host_and_port() -> None:
    assert split_address("10.0.0.1:6443") == ("10.0.0.1", 6443)
    assert split_address("https://[::1]:6443/") == ("::1", 6443)
    with pytest.raises(JoinError, match="expected <host>:<port>"):
        split_address("10.0.0.1")
