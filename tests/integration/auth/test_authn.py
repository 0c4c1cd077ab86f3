"""SPEC AU1: every connection is TLS from the cluster CA and every request authenticated;
no (or forged) credentials → 401 `Unauthorized`, and nothing is stored."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from skiff.pki import ensure_pki
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


async def test_AU1_anonymous_grpc_write_is_refused_and_nothing_stored(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """The gRPC port is mutual TLS: without a client certificate no call gets through."""
    name = f"anon-{uuid.uuid4().hex[:8]}"
    anonymous = ApiClient(secure_cluster.api_target, retry_seconds=1,
                          credentials=secure_cluster.credentials())  # trusts the CA only
    async with anonymous:
        with pytest.raises(ApiError) as err:
            await anonymous.create(_pod(name))
    assert err.value.reason == Reason.SERVICE_UNAVAILABLE, err.value.message
    assert "no client certificate" in err.value.message
    await _absent(admin, name)


async def test_AU1_certificate_from_another_ca_is_refused(
        secure_cluster: SecureCluster, admin: ApiClient, tmp_path: Path) -> None:
    """A self-made `system:masters` certificate is not an identity: the TLS handshake
    refuses it, nothing is stored."""
    forged = ensure_pki(tmp_path / "forged").admin
    name = f"forged-{uuid.uuid4().hex[:8]}"
    impostor = ApiClient(secure_cluster.api_target, retry_seconds=1,
                         credentials=secure_cluster.credentials(forged))
    async with impostor:
        with pytest.raises(ApiError) as err:
            await impostor.create(_pod(name))
    assert err.value.reason == Reason.SERVICE_UNAVAILABLE
    await _absent(admin, name)


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
