"""SPEC JN3, a joined node restarting: `skiff join` run again for the same name and data
dir starts the kubelet with the credentials the node holds while they are valid (as a
kubelet with an existing kubeconfig), and bootstraps again as a newcomer, saying why,
when they are stale; a token alone then cannot take the name of an existing Node."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from skiff.api import ApiError, Reason
from skiff.bootstraptoken import ca_cert_hash
from skiff.controller_manager.certificates.signing import Issuer, sign
from skiff.join.certificates import CLIENT_USAGES, build_request, new_key, write_pair
from skiff.join.discovery import JoinError
from skiff.join.identity import held_identity
from skiff.join.node import NodeFiles, _check_name_free
from skiff.pki import ensure_pki

NOW = datetime.datetime.now(datetime.UTC)


def _joined(tmp_path: Path, *, name: str = "node-1", signed_for: str = "",
            days: float = 1, ca_dir: str = "pki") -> tuple[NodeFiles, str]:
    """A data dir as `skiff join` leaves it, and the pin of the CA that signed it."""
    pki = ensure_pki(tmp_path / ca_dir)
    issuer = Issuer.load(cert_pem=pki.ca.read_bytes(),
                         key_pem=(pki.directory / "ca.key").read_bytes())
    key = new_key()
    csr = x509.load_pem_x509_csr(build_request(key, node_name=signed_for or name))
    # signed at NOW, the clock every check here is given (not the wall clock later: CI
    # runs this module minutes after importing it)
    cert = sign(issuer=issuer, csr=csr, usages=CLIENT_USAGES,
                valid_for=datetime.timedelta(days=days), now=NOW)
    files = NodeFiles(tmp_path / "data" / "joined" / name)
    files.ca_file.parent.mkdir(parents=True, exist_ok=True)
    files.ca_file.write_bytes(pki.ca.read_bytes())
    write_pair(files.client, cert_pem=cert, key=key)
    files.kubeconfig.write_text("clusters:\n- cluster: {server: 'https://apiserver:8080'}\n")
    return files, ca_cert_hash(pki.ca.read_bytes())


def test_jn3_a_restarting_node_keeps_the_identity_it_holds(tmp_path: Path) -> None:
    files, pin = _joined(tmp_path)
    held = held_identity(files, node_name="node-1", ca_hashes=[pin])
    assert held.identity is not None and held.stale == ""
    assert held.identity.ca_pem == files.ca_file.read_bytes()
    assert held.identity.server == "https://apiserver:8080"
    assert held.identity.not_after > NOW


def test_jn3_an_empty_data_dir_holds_nothing_and_nothing_stale(tmp_path: Path) -> None:
    held = held_identity(NodeFiles(tmp_path / "joined" / "node-1"), node_name="node-1",
                         ca_hashes=["sha256:" + "0" * 64])
    assert held.identity is None and held.stale == ""


@pytest.mark.parametrize("case, want", [
    ("expired", "its client certificate expired at "),
    ("other-ca", "its CA is not the one --discovery-token-ca-cert-hash pins"),
    ("other-node", "its client certificate is system:node:node-2's, not "
                   "system:node:node-1's in system:nodes"),
    ("other-key", "its client key does not match its certificate"),
    ("unreadable", "its client certificate or key cannot be read"),
])
def test_jn3_stale_credentials_mean_a_new_bootstrap_and_say_why(
        tmp_path: Path, case: str, want: str) -> None:
    files, pin = _joined(tmp_path, signed_for="node-2" if case == "other-node" else "")
    now = NOW
    if case == "expired":
        now = NOW + datetime.timedelta(days=2)
    elif case == "other-ca":
        _, pin = _joined(tmp_path / "other", ca_dir="other-pki")
    elif case == "other-key":
        other, _ = _joined(tmp_path / "again")
        files.client.key_file.write_bytes(other.client.key_file.read_bytes())
    elif case == "unreadable":
        files.client.cert_file.write_text("not a certificate")
    held = held_identity(files, node_name="node-1", ca_hashes=[pin], now=now)
    assert held.identity is None
    assert held.stale.startswith(want), held.stale


class _Nodes:
    """An API holding one Node (or none)."""

    def __init__(self, node: dict[str, Any] | None) -> None:
        self.node = node

    async def get(self, resource: str, name: str) -> dict[str, Any]:
        assert resource == "nodes"
        if self.node is None:
            raise ApiError(Reason.NOT_FOUND, f'nodes "{name}" not found')
        return self.node


def test_jn3_a_stale_node_may_not_take_its_existing_name_with_a_token_alone() -> None:
    node = {"metadata": {"name": "node-1"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    with pytest.raises(JoinError) as err:
        asyncio.run(_check_name_free(_Nodes(node), "node-1",  # type: ignore[arg-type]
                                     stale="its client certificate expired at X"))
    assert str(err.value) == (
        'a Node with name "node-1" and status "NotReady" already exists in the cluster. You '
        "must delete the existing Node or change the name of this new joining Node "
        "(--node-name). This data dir's credentials for it are no longer valid (its client "
        "certificate expired at X); delete the Node (`kubectl delete node node-1`) to join "
        "again under that name")
    asyncio.run(_check_name_free(_Nodes(None), "node-1",  # type: ignore[arg-type]
                                 stale="expired"))
