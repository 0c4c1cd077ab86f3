"""The compose cluster runs with TLS: what compose.yaml's `pki` service writes.

Each component's directory (the only one its container mounts) holds the CA and its own
identity, nothing of anyone else's; the admin kubeconfig's relative paths resolve from the
kubeconfig's directory (as kubectl reads them), so the skiff CLI gets the admin's files.
No node gets a certificate made for it (SPEC JN3): the nodes' `join` directory holds only a
bootstrap token and the CA's pin, and the controller-manager the CA key it signs CSRs with.
"""

from __future__ import annotations

import stat
from pathlib import Path

from skiff.bootstraptoken import ca_cert_hash, parse_token
from skiff.cluster.compose_pki import PROBE_USER, main
from skiff.cluster.kubeconfig import cli_credentials
from skiff.pki import identity_of


def _identity(path: Path) -> tuple[str, tuple[str, ...]]:
    who = identity_of(path.read_bytes())
    return who.user, who.groups


def test_issue14_compose_pki_gives_each_container_only_its_own_identity(
        tmp_path: Path) -> None:
    assert main([str(tmp_path), "--hosts", "apiserver,apiserver-2,etcd,etcd-2,etcd-3",
                 "--server", "https://127.0.0.1:18080"]) == 0

    from cryptography import x509

    # the nodes join: a token and the CA's pin, no certificate of any node anywhere
    assert sorted(p.name for p in (tmp_path / "join").iterdir()) == ["ca-cert-hash", "token"]
    token = parse_token((tmp_path / "join" / "token").read_text().strip())
    assert (tmp_path / "join" / "ca-cert-hash").read_text().strip() == ca_cert_hash(
        (tmp_path / "admin" / "ca.crt").read_bytes())
    users = [_identity(p)[0] for p in tmp_path.glob("*/*.crt") if p.parent.name != "ca"]
    assert not [u for u in users if u.startswith("system:node:")], users
    # the bootstrap-token service: the admin, and cluster-info's in-network server
    assert _identity(tmp_path / "token" / "client.crt") == ("kubernetes-admin",
                                                            ("system:masters",))
    assert "https://apiserver:8080" in (tmp_path / "token" / "kubeconfig").read_text()
    # the apiserver's client certificate for the kubelets' ports
    assert _identity(tmp_path / "apiserver" / "kubelet-client.crt") == (
        "kube-apiserver-kubelet-client", ())
    assert _identity(tmp_path / "scheduler" / "client.crt") == ("system:kube-scheduler", ())
    assert _identity(tmp_path / "controller-manager" / "client.crt") == (
        "system:kube-controller-manager", ())
    assert _identity(tmp_path / "admin" / "client.crt") == ("kubernetes-admin",
                                                            ("system:masters",))
    assert _identity(tmp_path / "apiserver" / "client.crt") == (PROBE_USER, ())
    # Only the apiserver holds an etcd client certificate; no CA key leaves DIR/ca.
    assert sorted(p.name for p in (tmp_path / "etcd").iterdir()) == [
        "ca.crt", "peer.crt", "peer.key", "server.crt", "server.key"]
    holders = sorted(p.parent.name for p in tmp_path.glob("*/etcd-client.key"))
    assert holders == ["apiserver"]
    # the cluster CA's key leaves DIR/ca only for the controller-manager (csrsigning)
    assert sorted(p.parent.name for p in tmp_path.glob("*/ca.key")) == [
        "ca", "controller-manager"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    # The apiserver's serving certificate names every service it is dialled at.
    cert = x509.load_pem_x509_certificate((tmp_path / "apiserver" / "tls.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"apiserver", "apiserver-2"} <= set(san.get_values_for_type(x509.DNSName))

    creds = cli_credentials(tmp_path / "kubeconfig")
    assert creds.ca_file == str(tmp_path / "admin" / "ca.crt")
    assert creds.cert_file == str(tmp_path / "admin" / "client.crt")
    assert Path(creds.key_file).read_bytes() == (tmp_path / "admin" / "client.key").read_bytes()

    # Run again (a restart of the project): the same certificates and token, kept.
    before = (tmp_path / "admin" / "client.crt").read_bytes()
    assert main([str(tmp_path)]) == 0
    assert (tmp_path / "admin" / "client.crt").read_bytes() == before
    assert parse_token((tmp_path / "join" / "token").read_text().strip()) == token
