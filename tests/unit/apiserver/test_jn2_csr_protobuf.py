"""SPEC JN2: the body `kubectl certificate approve` PUTs (a CertificateSigningRequest in
Kubernetes' protobuf encoding, with the managedFields its GET returned) decodes to the JSON
object, bytes fields base64, a user's extra as lists."""

from __future__ import annotations

from skiff.apiserver.endpoints.protobuf import decode
from tests.unit.apiserver.test_protobuf import envelope, field


def test_jn2_csr_approval_body_decodes() -> None:
    managed = (field(1, "kubectl") + field(2, "Update") + field(3, "certificates.k8s.io/v1")
               + field(6, "FieldsV1") + field(7, field(1, b'{"f:spec":{}}')))
    meta = field(1, "alice") + field(17, managed)
    spec = (field(1, b"PEM") + field(2, "bob") + field(4, "devs") + field(5, "client auth")
            + field(6, field(1, "scopes") + field(2, field(1, "a") + field(1, "b")))
            + field(7, "kubernetes.io/kube-apiserver-client") + field(8, 3600))
    status = field(1, field(1, "Approved") + field(6, "True") + field(2, "KubectlApprove"))
    body = envelope("certificates.k8s.io/v1", "CertificateSigningRequest",
                    field(1, meta) + field(2, spec) + field(3, status))
    assert decode(body) == {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "alice", "managedFields": [{
            "manager": "kubectl", "operation": "Update",
            "apiVersion": "certificates.k8s.io/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {}}}]},
        "spec": {"request": "UEVN", "username": "bob", "groups": ["devs"],
                 "usages": ["client auth"], "extra": {"scopes": ["a", "b"]},
                 "signerName": "kubernetes.io/kube-apiserver-client",
                 "expirationSeconds": 3600},
        "status": {"conditions": [{"type": "Approved", "status": "True",
                                   "reason": "KubectlApprove"}]}}
