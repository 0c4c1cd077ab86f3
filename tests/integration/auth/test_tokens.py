"""SPEC AU9: credentials die with what they are bound to.

Attacked as a hostile user would, on the real secure cluster: a ServiceAccount token whose
pod was deleted, whose ServiceAccount was deleted or recreated (new uid); a kubelet minting
tokens for pods that are not its own; a client certificate that expired after it was
accepted; a certificate token meant to live a century; a serving-only certificate."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.certtoken import CertificateTokens
from skiff.client import ApiClient
from skiff.pki import CertPair
from skiff.rpc import encode, method_path
from tests.integration.auth.conftest import SecureCluster

pytestmark = pytest.mark.integration

NAMESPACE = "default"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _pod(name: str, service_account: str, node: str = "") -> Obj:
    spec: Obj = {"serviceAccountName": service_account,
                 "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


async def _service_account(admin: ApiClient, name: str) -> Obj:
    return await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": name, "namespace": NAMESPACE}})


def _token_request(*, pod: Obj | None = None, uid: bool = True,
                   expiration: int = 3600) -> Obj:
    spec: Obj = {"expirationSeconds": expiration}
    if pod is not None:
        ref = {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"]}
        if uid:
            ref["uid"] = pod["metadata"]["uid"]
        spec["boundObjectRef"] = ref
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


async def _grpc_verdict(cluster: SecureCluster, token: str) -> Reason | None:
    """What the gRPC front answers a pod list with this bearer token: FORBIDDEN for a
    known user without rights, UNAUTHORIZED for a dead credential."""
    async with cluster.client(token=token) as client:
        try:
            await client.list("pods", NAMESPACE)
        except ApiError as err:
            return err.reason
    return None


def _https_status(cluster: SecureCluster, token: str) -> int:
    import urllib.error
    import urllib.request
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    request = urllib.request.Request(f"{cluster.https}/api/v1/namespaces/{NAMESPACE}/pods",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        err.close()
        return int(err.code)


async def _eventually(check: Callable[[], Awaitable[bool]], what: str,
                      timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def _both_fronts(cluster: SecureCluster, token: str) -> tuple[Reason | None, int]:
    return (await _grpc_verdict(cluster, token),
            await asyncio.to_thread(_https_status, cluster, token))


async def test_au9_a_pod_bound_token_is_401_once_its_pod_is_deleted(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    sa_name = _name("robot")
    await _service_account(admin, sa_name)
    pod = await admin.create(_pod(_name("holder"), sa_name))
    answer = await admin.create_token(NAMESPACE, sa_name, _token_request(pod=pod))
    token = answer["status"]["token"]
    # alive: the ServiceAccount is known (and has no rights)
    assert await _both_fronts(secure_cluster, token) == (Reason.FORBIDDEN, 403)
    await admin.delete("pods", pod["metadata"]["name"], NAMESPACE)

    async def dead() -> bool:
        return await _both_fronts(secure_cluster, token) == (Reason.UNAUTHORIZED, 401)
    await _eventually(dead, "the token of a deleted pod still authenticates")
    # a new pod of the same name is another pod: the token stays dead
    await admin.create(_pod(pod["metadata"]["name"], sa_name))
    await asyncio.sleep(0.3)
    assert await _both_fronts(secure_cluster, token) == (Reason.UNAUTHORIZED, 401)


async def test_au9_a_token_of_a_deleted_or_recreated_service_account_is_401(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    sa_name = _name("robot")
    await _service_account(admin, sa_name)
    token = (await admin.create_token(NAMESPACE, sa_name, _token_request()))["status"]["token"]
    assert await _both_fronts(secure_cluster, token) == (Reason.FORBIDDEN, 403)
    await admin.delete("serviceaccounts", sa_name, NAMESPACE)

    async def dead() -> bool:
        return await _both_fronts(secure_cluster, token) == (Reason.UNAUTHORIZED, 401)
    await _eventually(dead, "the token of a deleted ServiceAccount still authenticates")
    recreated = await _service_account(admin, sa_name)  # same name, a new uid
    assert recreated["metadata"]["uid"]
    await asyncio.sleep(0.3)
    assert await _both_fronts(secure_cluster, token) == (Reason.UNAUTHORIZED, 401)
    fresh = (await admin.create_token(NAMESPACE, sa_name, _token_request()))["status"]["token"]
    assert await _both_fronts(secure_cluster, fresh) == (Reason.FORBIDDEN, 403)


async def test_au9_a_node_gets_tokens_only_for_pods_bound_to_it(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """NodeRestriction: a kubelet's TokenRequest must be bound, by uid, to a pod on its
    own node (Kubernetes' messages), even for a ServiceAccount one of its pods runs as."""
    sa_name = _name("robot")
    await _service_account(admin, sa_name)
    here = await admin.create(_pod(_name("here"), sa_name, node="node-1"))
    there = await admin.create(_pod(_name("there"), sa_name, node="node-2"))
    forbidden = f'serviceaccounts "{sa_name}" is forbidden: '
    async with secure_cluster.client(secure_cluster.pki.node("node-1")) as kubelet:
        for request, why in (
                (_token_request(expiration=365 * 24 * 3600),
                 "node requested token not bound to a pod"),
                (_token_request(pod=there),
                 "node requested token bound to a pod scheduled on a different node"),
                (_token_request(pod=here, uid=False),
                 "node requested token with a pod binding without a uid")):
            with pytest.raises(ApiError) as err:
                await kubelet.create_token(NAMESPACE, sa_name, request)
            assert err.value.reason == Reason.FORBIDDEN, err.value.message
            assert err.value.message == forbidden + why
        # a ServiceAccount none of its pods runs as: the Node authorizer refuses
        other = _name("stranger")
        await _service_account(admin, other)
        with pytest.raises(ApiError) as err:
            await kubelet.create_token(NAMESPACE, other, _token_request())
        assert err.value.reason == Reason.FORBIDDEN
        assert err.value.message.endswith(
            "no relationship found between node 'node-1' and this object")
        # its own pod's token is what a kubelet gets
        answer = await kubelet.create_token(NAMESPACE, sa_name, _token_request(pod=here))
    assert await _grpc_verdict(secure_cluster, answer["status"]["token"]) == Reason.FORBIDDEN


def _short_lived_client(cluster: SecureCluster, directory: Path, *, user: str,
                        seconds: float = 0.0,
                        usages: tuple[x509.ObjectIdentifier, ...] = (
                            ExtendedKeyUsageOID.CLIENT_AUTH,)) -> CertPair:
    """A certificate from the cluster CA for `user`, valid for `seconds` from now (0: a
    day), with the extended key usages given."""
    ca_cert = x509.load_pem_x509_certificate(cluster.pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(
        (cluster.pki.directory / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(seconds=seconds or 86400))
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pair = CertPair(directory / f"{user}.crt", directory / f"{user}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return pair


def _client_context(cluster: SecureCluster, pair: CertPair) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


async def test_au9_an_expired_client_certificate_is_refused_after_being_accepted(
        secure_cluster: SecureCluster, tmp_path: Path) -> None:
    """Accepted while valid, on gRPC (its certificate token) and on an HTTPS connection
    opened while it was valid; 401 on both once it has expired."""
    lifetime = 3.0
    pair = _short_lived_client(secure_cluster, tmp_path, user=_name("brief"),
                               seconds=lifetime)
    expires = time.time() + lifetime
    url = f"{secure_cluster.https}/api/v1/namespaces/{NAMESPACE}/pods"
    connector = aiohttp.TCPConnector(ssl=_client_context(secure_cluster, pair), limit=1)
    async with secure_cluster.client(pair) as client, \
            aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(ApiError) as err:
            await client.list("pods", NAMESPACE)
        assert err.value.reason == Reason.FORBIDDEN  # known, without rights
        async with session.get(url) as answer:
            assert answer.status == 403
        await asyncio.sleep(expires - time.time() + 1.5)
        with pytest.raises(ApiError) as err:
            await client.list("pods", NAMESPACE)
        assert err.value.reason == Reason.UNAUTHORIZED, err.value.message
        async with session.get(url) as answer:  # the same TLS connection
            assert answer.status == 401


async def test_au9_a_certificate_token_meant_to_live_a_century_is_refused(
        secure_cluster: SecureCluster) -> None:
    """The admin's own certificate and key, signing a token for 100 years: refused on gRPC
    and as an HTTPS bearer token; one for the usual few minutes works."""
    century = CertificateTokens(secure_cluster.pki.admin.cert, secure_cluster.pki.admin.key,
                                lifetime=100 * 365 * 24 * 3600.0).token()
    usual = CertificateTokens(secure_cluster.pki.admin.cert,
                              secure_cluster.pki.admin.key).token()
    creds = grpc.ssl_channel_credentials(secure_cluster.pki.ca.read_bytes())
    async with grpc.aio.secure_channel(secure_cluster.api_target, creds) as channel:
        get = channel.unary_unary(method_path("List"))
        await get(encode({"resource": "namespaces"}), timeout=10,
                  metadata=(("authorization", f"Bearer {usual}"),))
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await get(encode({"resource": "namespaces"}), timeout=10,
                      metadata=(("authorization", f"Bearer {century}"),))
    assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await asyncio.to_thread(_https_status, secure_cluster, usual) == 200
    assert await asyncio.to_thread(_https_status, secure_cluster, century) == 401


async def test_au9_a_server_only_certificate_is_refused(
        secure_cluster: SecureCluster, tmp_path: Path) -> None:
    """A certificate the cluster CA issued for serving only (a kubelet's serving
    certificate names `system:node:<node>`) is no client identity: 401 on gRPC, and HTTPS
    refuses it (401 or at the handshake)."""
    serving = secure_cluster.pki.kubelet_serving["node-1"]
    async with secure_cluster.client(serving) as client:
        with pytest.raises(ApiError) as err:
            await client.get("nodes", "node-1")
    assert err.value.reason == Reason.UNAUTHORIZED, err.value.message
    serving_only = _short_lived_client(secure_cluster, tmp_path, user="server-only-admin",
                                     usages=(ExtendedKeyUsageOID.SERVER_AUTH,))
    url = f"{secure_cluster.https}/api/v1/namespaces"
    for pair in (serving, serving_only):
        connector = aiohttp.TCPConnector(ssl=_client_context(secure_cluster, pair))
        async with aiohttp.ClientSession(connector=connector) as session:
            try:
                async with session.get(url) as answer:
                    status = answer.status
            except aiohttp.ClientError:
                status = 0  # the handshake refused it
        assert status in (0, 401), status


def _claims(token: str) -> Obj:
    import jwt
    decoded: Obj = jwt.decode(token, options={"verify_signature": False})
    return decoded


async def test_au9_token_request_lifetimes_are_bounded_as_kubernetes_bounds_them(
        secure_cluster: SecureCluster, admin: ApiClient) -> None:
    """expirationSeconds between 10 minutes and 2^32 s (422 otherwise); the kubelet's
    3607-second pod-bound token lives a year with `warnafter` (the answer still says 3607
    seconds, which is when the kubelet refreshes it); any other request gets what it asked."""
    sa_name = _name("robot")
    await _service_account(admin, sa_name)
    pod = await admin.create(_pod(_name("holder"), sa_name))
    for seconds, detail in ((599, "may not specify a duration less than 10 minutes"),
                            ((1 << 32) + 1, "may not specify a duration larger than 2^32 "
                                            "seconds")):
        with pytest.raises(ApiError) as err:
            await admin.create_token(NAMESPACE, sa_name, _token_request(expiration=seconds))
        assert err.value.reason == Reason.INVALID
        assert err.value.message == (f'TokenRequest.authentication.k8s.io "" is invalid: '
                                     f"spec.expirationSeconds: Invalid value: {seconds}: "
                                     f"{detail}")
    kubelets = await admin.create_token(NAMESPACE, sa_name,
                                        _token_request(pod=pod, expiration=3607))
    claims = _claims(kubelets["status"]["token"])
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607
    assert kubelets["spec"]["expirationSeconds"] == 3607
    told = datetime.datetime.fromisoformat(
        kubelets["status"]["expirationTimestamp"].replace("Z", "+00:00")).timestamp()
    assert abs(told - (claims["iat"] + 3607)) <= 1
    plain = _claims((await admin.create_token(
        NAMESPACE, sa_name, _token_request(pod=pod, expiration=3600)))["status"]["token"])
    assert plain["exp"] - plain["iat"] == 3600 and "warnafter" not in plain["kubernetes.io"]
