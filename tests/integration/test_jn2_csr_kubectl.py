"""SPEC JN2 against a real `skiff up` cluster and the real kubectl: a user's CSR applied with
`kubectl apply` is Pending in `kubectl get csr`, `kubectl certificate approve` approves it,
the csrsigning controller issues a certificate that verifies against the cluster CA and
authenticates that user; a kubelet client CSR from a `system:bootstrappers` member is
auto-approved by csrapproving and signed; `kubectl certificate deny` denies."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from skiff.pki import issue_client
from tests.integration.kubectl import kubectl
from tests.integration.skiffcli import skiff_up

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    with skiff_up(tmp_path_factory.mktemp("skiff-csr"), nodes=0) as data_dir:
        yield data_dir


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def _request(key: ec.EllipticCurvePrivateKey, cn: str, *orgs: str) -> str:
    names = [x509.NameAttribute(NameOID.COMMON_NAME, cn),
             *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs)]
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names)).sign(
        key, hashes.SHA256())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def _csr(name: str, request: str, signer: str, usages: list[str]) -> str:
    return json.dumps({"apiVersion": "certificates.k8s.io/v1",
                       "kind": "CertificateSigningRequest", "metadata": {"name": name},
                       "spec": {"request": request, "signerName": signer,
                                "expirationSeconds": 3600, "usages": usages}})


def _issued(config: Path, name: str) -> bytes:
    deadline = time.monotonic() + 20
    while True:
        cert = _ok(kubectl(config, "get", "csr", name, "-o",
                           "jsonpath={.status.certificate}"))
        if cert:
            return base64.b64decode(cert)
        assert time.monotonic() < deadline, _ok(kubectl(config, "get", "csr", name,
                                                        "-o", "yaml"))
        time.sleep(0.3)


def _row(config: Path, name: str) -> str:
    return next(line for line in _ok(kubectl(config, "get", "csr")).splitlines()
                if line.startswith(f"{name} "))


def _kubeconfig_for(cluster: Path, tmp_path: Path, cert: bytes, key: bytes) -> Path:
    (tmp_path / "user.crt").write_bytes(cert)
    (tmp_path / "user.key").write_bytes(key)
    admin = (cluster / "kubeconfig").read_text()
    config = tmp_path / "kubeconfig"
    config.write_text(admin)
    _ok(kubectl(config, "config", "set-credentials", "csr-user", "--client-certificate",
                str(tmp_path / "user.crt"), "--client-key", str(tmp_path / "user.key")))
    context = _ok(kubectl(config, "config", "current-context")).strip()
    _ok(kubectl(config, "config", "set-context", context, "--user", "csr-user"))
    return config


def test_jn2_kubectl_get_approve_sign_and_authenticate(cluster: Path,
                                                       tmp_path: Path) -> None:
    config = cluster / "kubeconfig"
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(config, "apply", "-f", "-", stdin=_csr(
        "alice", _request(key, "alice", "devs"), "kubernetes.io/kube-apiserver-client",
        ["client auth"])))
    header = _ok(kubectl(config, "get", "csr")).splitlines()[0].split()
    assert header == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION",
                      "CONDITION"]
    row = _row(config, "alice").split()
    assert row[2:] == ["kubernetes.io/kube-apiserver-client", "skiff-admin", "60m",
                       "Pending"] or (row[2], row[4], row[5]) == (
        "kubernetes.io/kube-apiserver-client", "60m", "Pending"), row
    out = _ok(kubectl(config, "certificate", "approve", "alice"))
    assert "certificatesigningrequest.certificates.k8s.io/alice approved" in out
    pem = _issued(config, "alice")
    assert _row(config, "alice").split()[-1] == "Approved,Issued"
    cert = x509.load_pem_x509_certificate(pem)
    ca = x509.load_pem_x509_certificate((cluster / "pki" / "ca.crt").read_bytes()
                                        if (cluster / "pki" / "ca.crt").exists() else
                                        next(cluster.rglob("ca.crt")).read_bytes())
    cert.verify_directly_issued_by(ca)
    assert 3000 < (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() \
        <= 3600 + 300
    user_config = _kubeconfig_for(cluster, tmp_path, pem, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    whoami = json.loads(_ok(kubectl(user_config, "auth", "whoami", "-o", "json")))
    assert whoami["status"]["userInfo"]["username"] == "alice"
    assert "devs" in whoami["status"]["userInfo"]["groups"]
    # approval conditions are kept: the CSR cannot be denied after approval
    denied = kubectl(config, "certificate", "deny", "alice")
    assert denied.returncode != 0 or "approved" in denied.stdout + denied.stderr


def test_jn2_kubectl_certificate_deny(cluster: Path) -> None:
    config = cluster / "kubeconfig"
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(config, "apply", "-f", "-", stdin=_csr(
        "mallory", _request(key, "mallory"), "kubernetes.io/kube-apiserver-client",
        ["client auth"])))
    out = _ok(kubectl(config, "certificate", "deny", "mallory"))
    assert "certificatesigningrequest.certificates.k8s.io/mallory denied" in out
    assert _row(config, "mallory").split()[-1] == "Denied"
    time.sleep(1)
    assert not _ok(kubectl(config, "get", "csr", "mallory", "-o",
                           "jsonpath={.status.certificate}"))
    selected = _ok(kubectl(config, "get", "csr", "--field-selector",
                           "spec.signerName=kubernetes.io/kube-apiserver-client", "-o",
                           "name"))
    assert "certificatesigningrequest.certificates.k8s.io/mallory" in selected.split()
    other = _ok(kubectl(config, "get", "csr", "--field-selector",
                        "spec.signerName=example.com/other", "-o", "name"))
    assert "mallory" not in other


def test_jn2_bootstrapper_kubelet_csr_is_auto_approved_and_signed(cluster: Path,
                                                                  tmp_path: Path) -> None:
    pki = next(cluster.rglob("ca.key")).parent
    pair = issue_client(pki, "jn2-bootstrapper", user="system:bootstrap:abcdef",
                        groups=["system:bootstrappers"])
    config = _kubeconfig_for(cluster, tmp_path, pair.cert.read_bytes(),
                             pair.key.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(config, "create", "-f", "-", stdin=_csr(
        "node-csr-jn2", _request(key, "system:node:joiner", "system:nodes"),
        "kubernetes.io/kube-apiserver-client-kubelet",
        ["digital signature", "client auth"])))
    admin = cluster / "kubeconfig"
    pem = _issued(admin, "node-csr-jn2")
    obj = json.loads(_ok(kubectl(admin, "get", "csr", "node-csr-jn2", "-o", "json")))
    assert obj["spec"]["username"] == "system:bootstrap:abcdef"
    assert "system:bootstrappers" in obj["spec"]["groups"]
    approved = [c for c in obj["status"]["conditions"] if c["type"] == "Approved"]
    assert approved[0]["reason"] == "AutoApproved"
    assert approved[0]["message"] == ("Auto approving kubelet client certificate after "
                                      "SubjectAccessReview.")
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.rfc4514_string() == "O=system:nodes,CN=system:node:joiner"


def test_jn2_approving_needs_the_approval_subresource_and_approve_on_the_signer(
        cluster: Path, tmp_path: Path) -> None:
    admin = cluster / "kubeconfig"
    pki = next(cluster.rglob("ca.key")).parent
    pair = issue_client(pki, "jn2-carol", user="carol")
    carol = _kubeconfig_for(cluster, tmp_path, pair.cert.read_bytes(), pair.key.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(admin, "apply", "-f", "-", stdin=_csr(
        "for-carol", _request(key, "dave"), "kubernetes.io/kube-apiserver-client",
        ["client auth"])))
    rules = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
              "verbs": ["get", "list", "watch"]}]
    role: dict[str, object] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "jn2-csr-reader"}, "rules": rules}
    _ok(kubectl(admin, "apply", "-f", "-", stdin=json.dumps(role)))
    _ok(kubectl(admin, "create", "clusterrolebinding", "jn2-carol", "--clusterrole",
                "jn2-csr-reader", "--user", "carol"))
    no_subresource = kubectl(carol, "certificate", "approve", "for-carol")
    assert no_subresource.returncode != 0
    assert "certificatesigningrequests/approval" in no_subresource.stderr, no_subresource
    rules.append({"apiGroups": ["certificates.k8s.io"],
                  "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]})
    _ok(kubectl(admin, "apply", "-f", "-", stdin=json.dumps(role)))
    time.sleep(1)
    no_signer = kubectl(carol, "certificate", "approve", "for-carol")
    assert no_signer.returncode != 0
    assert ('user not permitted to approve requests with signerName '
            '"kubernetes.io/kube-apiserver-client"') in no_signer.stderr, no_signer
    rules.append({"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                  "resourceNames": ["kubernetes.io/kube-apiserver-client"],
                  "verbs": ["approve"]})
    _ok(kubectl(admin, "apply", "-f", "-", stdin=json.dumps(role)))
    time.sleep(1)
    _ok(kubectl(carol, "certificate", "approve", "for-carol"))
    _issued(admin, "for-carol")


def test_jn2_node_renewal_is_auto_approved_as_selfnodeclient(cluster: Path,
                                                            tmp_path: Path) -> None:
    pki = next(cluster.rglob("ca.key")).parent
    pair = issue_client(pki, "jn2-node", user="system:node:renewer", groups=["system:nodes"])
    node = _kubeconfig_for(cluster, tmp_path, pair.cert.read_bytes(), pair.key.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(node, "create", "-f", "-", stdin=_csr(
        "node-renewal", _request(key, "system:node:renewer", "system:nodes"),
        "kubernetes.io/kube-apiserver-client-kubelet", ["client auth"])))
    admin = cluster / "kubeconfig"
    _issued(admin, "node-renewal")
    obj = json.loads(_ok(kubectl(admin, "get", "csr", "node-renewal", "-o", "json")))
    approved = [c for c in obj["status"]["conditions"] if c["type"] == "Approved"]
    assert approved[0]["message"] == ("Auto approving self kubelet client certificate after "
                                      "SubjectAccessReview.")
    # another node's name is not this node's renewal, and not a bootstrapper's request
    _ok(kubectl(node, "create", "-f", "-", stdin=_csr(
        "node-other", _request(key, "system:node:other", "system:nodes"),
        "kubernetes.io/kube-apiserver-client-kubelet", ["client auth"])))
    time.sleep(2)
    assert _row(admin, "node-other").split()[-1] == "Pending"


def test_jn2_breaking_the_signer_rules_fails_the_csr(cluster: Path) -> None:
    admin = cluster / "kubeconfig"
    key = ec.generate_private_key(ec.SECP256R1())
    _ok(kubectl(admin, "apply", "-f", "-", stdin=_csr(
        "bad-kubelet", _request(key, "not-a-node"),
        "kubernetes.io/kube-apiserver-client-kubelet", ["client auth"])))
    _ok(kubectl(admin, "certificate", "approve", "bad-kubelet"))
    deadline = time.monotonic() + 20
    while _row(admin, "bad-kubelet").split()[-1] != "Approved,Failed":
        assert time.monotonic() < deadline, _row(admin, "bad-kubelet")
        time.sleep(0.3)
    obj = json.loads(_ok(kubectl(admin, "get", "csr", "bad-kubelet", "-o", "json")))
    failed = [c for c in obj["status"]["conditions"] if c["type"] == "Failed"]
    assert failed[0]["reason"] == "SignerValidationFailure"
    assert "system:nodes" in failed[0]["message"]
    assert "certificate" not in obj["status"]
