"""The kubelets' serving certificates and who may use a kubelet's own port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from skiff.api import ApiError, Reason
from skiff.kubelet.serving import check_caller
from skiff.pki import APISERVER_KUBELET_CLIENT, ensure_pki, issue_client


def _sans(cert: Path) -> set[str]:
    ext = x509.load_pem_x509_certificate(cert.read_bytes()).extensions
    san = ext.get_extension_for_class(x509.SubjectAlternativeName).value
    return ({str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
            | set(san.get_values_for_type(x509.DNSName)))


def test_AU1_kubelet_serving_certificate_names_the_node_and_its_address(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, nodes=["node-1"], node_hosts={"node-1": ["10.231.0.101"]})
    assert {"node-1", "127.0.0.1", "10.231.0.101"} <= _sans(pki.kubelet_serving["node-1"].cert)
    assert "--kubelet-client-certificate" in pki.apiserver_tls_args()


def test_AU1_a_kept_certificate_is_issued_again_when_an_address_is_missing(
        tmp_path: Path) -> None:
    first = ensure_pki(tmp_path, nodes=["node-1"]).kubelet_serving["node-1"].cert.read_bytes()
    again = ensure_pki(tmp_path, nodes=["node-1"]).kubelet_serving["node-1"].cert
    assert again.read_bytes() == first  # restart: kept
    moved = ensure_pki(tmp_path, nodes=["node-1"], node_hosts={"node-1": ["10.231.0.102"]})
    assert "10.231.0.102" in _sans(moved.kubelet_serving["node-1"].cert)


class _Context:
    def __init__(self, pem: bytes | None) -> None:
        self._pem = pem

    def auth_context(self) -> dict[str, Any]:
        return {"x509_pem_cert": [self._pem]} if self._pem else {}


@pytest.mark.parametrize(("user", "groups", "allowed"), [
    pytest.param(APISERVER_KUBELET_CLIENT, (), True, id="apiserver-kubelet-client"),
    pytest.param("kubernetes-admin", ("system:masters",), True, id="system-masters"),
    pytest.param("system:node:node-2", ("system:nodes",), False, id="another-node"),
    pytest.param("carol", (), False, id="a-user"),
])
def test_AU1_only_the_apiserver_and_masters_may_use_the_kubelet_port(
        tmp_path: Path, user: str, groups: tuple[str, ...], allowed: bool) -> None:
    ensure_pki(tmp_path)
    pair = issue_client(tmp_path, "caller", user=user, groups=groups)
    context: Any = _Context(pair.cert.read_bytes())
    if allowed:
        check_caller(context, "/skiff.v1.Kubelet/Logs")
        return
    with pytest.raises(ApiError) as err:
        check_caller(context, "/skiff.v1.Kubelet/Logs")
    assert err.value.reason == Reason.FORBIDDEN
    assert err.value.message == (f"Forbidden (user={user}, verb=create, resource=nodes, "
                                 "subresource=proxy)")


async def test_AU1_the_apiserver_checks_a_kubelet_certificate_names_the_node_it_dials(
        tmp_path: Path) -> None:
    """A compose node's address is Docker's to choose, so no certificate can name it in
    advance: the apiserver dials the Node's InternalIP and checks the kubelet's serving
    certificate names the node (`KubeletTarget`). A certificate for another name fails."""
    import grpc

    from skiff.client import Credentials
    from skiff.client.kubelet import KubeletTarget, kubelet_channel
    from skiff.pki import CertificateAuthority

    ca = CertificateAuthority.load_or_create(tmp_path)
    serving = ca.issue(tmp_path / "serving", common_name="system:node:node-x",
                       hosts=("node-x",), server=True)  # no address at all
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {
        "Echo": grpc.unary_unary_rpc_method_handler(_echo)})])
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
        [(serving.key.read_bytes(), serving.cert.read_bytes())]))
    await server.start()
    creds = Credentials(ca_file=str(ca.files.cert),
                        cert_file=str(issue_client(tmp_path, "c", user="u").cert),
                        key_file=str(tmp_path / "c.key"))
    try:
        for target, answers in ((KubeletTarget(f"127.0.0.1:{port}", "node-x"), True),
                                (KubeletTarget(f"127.0.0.1:{port}", "node-y"), False),
                                (f"127.0.0.1:{port}", False)):
            async with kubelet_channel(target, creds) as channel:
                try:
                    said = await channel.unary_unary("/t.T/Echo")(b"hi", timeout=5)
                except grpc.aio.AioRpcError as err:
                    assert not answers, (target, err.details())
                    assert err.code() == grpc.StatusCode.UNAVAILABLE
                else:
                    assert answers and said == b"hi", target
    finally:
        await server.stop(None)


async def _echo(request: bytes, context: Any) -> bytes:
    return request
