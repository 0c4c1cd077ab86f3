"""SPEC JN3: `skiff up --advertise-address IP` refuses what cannot work with a clear line
before anything starts, and the serving certificate of a kept PKI is issued again when it
does not name the address (the two-machine join is tests/integration/
test_jn3_join_two_hosts.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from skiff.cli.join import pods_api_address
from skiff.cluster import advertise
from skiff.cluster.config import ClusterConfig
from skiff.cluster.local import LocalCluster
from skiff.cluster.processes import StartError
from skiff.cluster.provider import new_cluster
from skiff.pki import ensure_pki

ELSEWHERE = "198.51.100.7"  # documentation range: no address of this machine


@pytest.mark.parametrize(("address", "message"), [
    ("node-1.example", "--advertise-address 'node-1.example': not an IP address"),
    ("fd00::1", "--advertise-address 'fd00::1': only IPv4 addresses are supported"),
    ("0.0.0.0", "give one address of this machine, not 0.0.0.0"),
    (ELSEWHERE, f"--advertise-address '{ELSEWHERE}': not an address of this machine "
                "(cannot bind to it"),
])
def test_jn3_an_unusable_advertise_address_is_named(address: str, message: str) -> None:
    with pytest.raises(StartError) as err:
        advertise.check_address(address)
    assert message in str(err.value)


def test_jn3_an_address_of_this_machine_is_accepted() -> None:
    assert advertise.check_address("127.0.0.1") == "127.0.0.1"


def test_jn3_a_taken_apiserver_port_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(advertise, "HTTPS_PORT", port)
        with pytest.raises(StartError, match=f"port {port} \\(apiserver's HTTPS API\\) "
                                             "is not free"):
            advertise.check_ports(["apiserver"])


def test_jn3_the_config_key_advertises_too(tmp_path: Path) -> None:
    config = ClusterConfig({"apiserver": {"advertiseAddress": "10.0.0.5"}})
    assert LocalCluster(tmp_path, config=config).advertised() == "10.0.0.5"
    flag = LocalCluster(tmp_path, config=config, advertise_address="10.0.0.6")
    assert flag.advertised() == "10.0.0.6"  # the flag wins
    assert LocalCluster(tmp_path).advertised() == ""


def test_jn3_advertise_address_refuses_insecure_and_netns(tmp_path: Path) -> None:
    with pytest.raises(StartError, match="without TLS or authentication; drop --insecure"):
        LocalCluster(tmp_path, insecure=True, advertise_address="127.0.0.1").start()
    with pytest.raises(StartError, match="a --netns cluster's hosts have addresses"):
        new_cluster(tmp_path, netns=True, advertise_address="127.0.0.1")
    assert not (tmp_path / "pki").exists()  # refused before anything was made


def test_jn3_skiff_up_prints_the_refusal_as_one_line(tmp_path: Path) -> None:
    up = subprocess.run([sys.executable, "-m", "skiff.cli.main", "--data-dir", str(tmp_path),
                         "up", "--advertise-address", ELSEWHERE, "--detach"],
                        capture_output=True, text=True, timeout=60)
    assert up.returncode != 0
    assert "not an address of this machine" in up.stderr and "Traceback" not in up.stderr


def _ips(cert_file: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def test_jn3_a_kept_pki_gets_a_serving_certificate_naming_the_address(
        tmp_path: Path) -> None:
    first = ensure_pki(tmp_path / "pki")
    assert ELSEWHERE not in _ips(first.apiserver.cert)
    ca, admin = first.ca.read_bytes(), first.admin.cert.read_bytes()
    again = ensure_pki(tmp_path / "pki", hosts=(ELSEWHERE,))
    assert ELSEWHERE in _ips(again.apiserver.cert) and "127.0.0.1" in _ips(
        again.apiserver.cert)
    # the CA and everything else are kept: joined nodes and kubeconfigs stay valid
    assert again.ca.read_bytes() == ca and again.admin.cert.read_bytes() == admin


def test_jn3_joined_pods_get_the_advertised_https_api_only() -> None:
    assert pods_api_address(address="10.0.0.5:6443",
                            server="https://10.0.0.5:8080") == "10.0.0.5:8080"
    # a --netns cluster-info names the CLI's gateway on the control plane's loopback
    assert pods_api_address(address="10.0.0.5:6443", server="https://127.0.0.1:39001") == ""
    assert pods_api_address(address="10.0.0.5:6443", server="") == ""
