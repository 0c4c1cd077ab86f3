"""SPEC AU1: every connection is TLS from the cluster CA and every request authenticated;
no (or forged) credentials → 401 `Unauthorized`, and nothing is stored."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest

from skiff.api import ApiError, Reason
from skiff.certtoken import CertificateTokens
from skiff.client import ApiClient
from skiff.pki import ensure_pki
from skiff.rpc import encode, method_path
from tests.integration.auth.conftest import SecureCluster


def _pod(name: str, namespace: str = "default") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "command": ["sh", "-c", "id > /tmp/x"]}]}}


async def _absent(admin: ApiClient, name: str) -> None:
    with pytest.raises(ApiError) as err:
        await admin.get("pods", name, "default")
    assert err.value.reason == Reason.NOT_FOUND


async def test_AU1_anonymous_grpc_write_is_401_and_nothing_stored(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """TLS that trusts the CA but no credentials: the call is answered 401, as over HTTPS
    (raw gRPC, no Skiff client: the status a gRPC tool would see)."""
    name = f"anon-{uuid.uuid4().hex[:8]}"
    creds = grpc.ssl_channel_credentials(secure_cluster.pki.ca.read_bytes())
    async with grpc.aio.secure_channel(secure_cluster.api_target, creds) as channel:
        create = channel.unary_unary(method_path("Create"))
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await create(encode({"resource": "pods", "namespace": "default",
                                 "object": _pod(name)}), timeout=10)
    assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert raw.value.details() == "Unauthorized"
    anonymous = ApiClient(secure_cluster.api_target, retry_seconds=1,
                          credentials=secure_cluster.credentials())  # trusts the CA only
    async with anonymous:
        with pytest.raises(ApiError) as err:
            await anonymous.create(_pod(name))
    assert err.value.reason == Reason.UNAUTHORIZED, err.value.message
    await _absent(admin, name)


async def test_AU1_certificate_from_another_ca_is_401(
        secure_cluster: SecureCluster, admin: ApiClient, tmp_path: Path) -> None:
    """A self-made `system:masters` certificate is not an identity, nothing is stored."""
    forged = ensure_pki(tmp_path / "forged").admin
    name = f"forged-{uuid.uuid4().hex[:8]}"
    impostor = ApiClient(secure_cluster.api_target, retry_seconds=1,
                         credentials=secure_cluster.credentials(forged))
    async with impostor:
        with pytest.raises(ApiError) as err:
            await impostor.create(_pod(name))
    assert err.value.reason == Reason.UNAUTHORIZED
    await _absent(admin, name)


async def test_AU1_a_certificate_without_its_key_is_not_an_identity(
        secure_cluster: SecureCluster, admin: ApiClient, tmp_path: Path) -> None:
    """The admin's certificate (public) with a token signed by another key: 401. So is a
    token signed by the right key once it has expired."""
    name = f"stolen-{uuid.uuid4().hex[:8]}"
    other_key = ensure_pki(tmp_path / "other").admin.key
    stolen = CertificateTokens(secure_cluster.pki.admin.cert, other_key)
    expired = CertificateTokens(secure_cluster.pki.admin.cert, secure_cluster.pki.admin.key,
                                lifetime=-120)
    creds = grpc.ssl_channel_credentials(secure_cluster.pki.ca.read_bytes())
    async with grpc.aio.secure_channel(secure_cluster.api_target, creds) as channel:
        create = channel.unary_unary(method_path("Create"))
        for tokens in (stolen, expired):
            with pytest.raises(grpc.aio.AioRpcError) as raw:
                await create(encode({"resource": "pods", "namespace": "default",
                                     "object": _pod(name)}), timeout=10,
                             metadata=(("authorization", f"Bearer {tokens.token()}"),))
            assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
    await _absent(admin, name)


async def test_AU1_bearer_token_user_over_grpc(secure_cluster: SecureCluster,
                                               admin: ApiClient) -> None:
    """A `--token-auth-file` user is known on gRPC too: authenticated (bob), then RBAC
    decides (no binding: 403 naming bob, not 401)."""
    async with secure_cluster.client(token="token-bob") as bob:
        with pytest.raises(ApiError) as err:
            await bob.create(_pod(f"bob-{uuid.uuid4().hex[:8]}"))
    assert err.value.reason == Reason.FORBIDDEN, err.value.message
    assert 'User "bob" cannot create resource "pods"' in err.value.message


async def test_AU1_unknown_bearer_token_is_401(secure_cluster: SecureCluster,
                                               admin: ApiClient) -> None:
    name = f"tok-{uuid.uuid4().hex[:8]}"
    context = ssl.create_default_context(cafile=str(secure_cluster.pki.ca))
    request = urllib.request.Request(
        f"{secure_cluster.https}/api/v1/namespaces/default/pods", method="POST",
        data=json.dumps(_pod(name)).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer not-a-token"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, context=context, timeout=10)
    err.value.close()
    assert err.value.code == 401
    await _absent(admin, name)


async def test_AU1_anonymous_https_write_is_401_and_nothing_stored(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    name = f"anon-http-{uuid.uuid4().hex[:8]}"
    context = ssl.create_default_context(cafile=str(secure_cluster.pki.ca))
    request = urllib.request.Request(
        f"{secure_cluster.https}/api/v1/namespaces/default/pods", method="POST",
        data=json.dumps(_pod(name)).encode(), headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, context=context, timeout=10)
    assert err.value.code == 401
    with err.value:
        status = json.loads(err.value.read())
    assert (status["kind"], status["reason"], status["message"]) == (
        "Status", "Unauthorized", "Unauthorized")
    await _absent(admin, name)


def test_AU1_plaintext_http_is_refused(secure_cluster: SecureCluster) -> None:
    """The kubectl port speaks only TLS."""
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{secure_cluster.http_port}/api/v1/pods",
                               timeout=10).read()
