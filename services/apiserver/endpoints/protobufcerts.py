"""The certificates.k8s.io/v1 messages of Skiff's protobuf body table (SPEC JN2): `kubectl
certificate approve|deny` GETs a CertificateSigningRequest and PUTs it back to its
`approval` subresource in Kubernetes' protobuf encoding. Field numbers are the public wire
contract of `k8s.io/api/certificates/v1`; protobuf.py merges this table into its own.
"""

from __future__ import annotations

MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    "ExtraValue": [("items", 1, "[]string")],  # a user's extra values: a list in JSON
    "CertificateSigningRequestSpec": [
        ("request", 1, "bytes"), ("username", 2, "string"), ("uid", 3, "string"),
        ("groups", 4, "[]string"), ("usages", 5, "[]string"), ("extra", 6, "map:ExtraValue"),
        ("signerName", 7, "string"), ("expirationSeconds", 8, "int32")],
    "CertificateSigningRequestCondition": [
        ("type", 1, "string"), ("reason", 2, "string"), ("message", 3, "string"),
        ("lastUpdateTime", 4, "Time"), ("lastTransitionTime", 5, "Time"),
        ("status", 6, "string")],
    "CertificateSigningRequestStatus": [
        ("conditions", 1, "[]CertificateSigningRequestCondition"),
        ("certificate", 2, "bytes")],
    "CertificateSigningRequest": [("metadata", 1, "ObjectMeta"),
                                  ("spec", 2, "CertificateSigningRequestSpec"),
                                  ("status", 3, "CertificateSigningRequestStatus")],
}
