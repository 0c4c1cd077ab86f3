"""What the csrsigning controller decides, as pure functions
(`pkg/controller/certificates/signer` and `pkg/apis/certificates/v1/helpers`): which
kubernetes.io signer a CSR names, whether the CSR keeps that signer's rules (a kubelet
signer's subject `system:node:<name>` in `system:nodes` and its usages), how long the
certificate lives, and the certificate itself, issued by the cluster CA.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skiff.api.groups.certificates import (
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
    MIN_EXPIRATION_SECONDS,
)

SIGNERS = (KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING)
NODES_GROUP = "system:nodes"
NODE_PREFIX = "system:node:"
# Kubernetes' kubelet signers: usages a CSR must have and the ones it may add
_KUBELET_CLIENT_REQUIRED = {"client auth"}
_KUBELET_SERVING_REQUIRED = {"server auth"}
_KEY_USAGES = {"digital signature", "key encipherment"}
_CLIENT_ALLOWED = {"client auth", "digital signature", "key encipherment"}
_SERVING_ALLOWED = {"server auth", "digital signature", "key encipherment"}
# the signer backdates the start by this much (clock skew), as Kubernetes' does
_BACKDATE = datetime.timedelta(minutes=5)


class SignerRuleError(ValueError):
    """The CSR breaks its signer's rules: the controller marks it Failed with this text."""


@dataclass(frozen=True)
class Issuer:
    """The cluster CA (kube-controller-manager's --cluster-signing-cert/key-file)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

    @classmethod
    def load(cls, *, cert_pem: bytes, key_pem: bytes) -> Issuer:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError("the cluster signing key must be an EC or RSA key")
        return cls(x509.load_pem_x509_certificate(cert_pem), key)


def _organizations(csr: x509.CertificateSigningRequest) -> list[str]:
    return [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _common_name(csr: x509.CertificateSigningRequest) -> str:
    names = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def _san(csr: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def check_signer_rules(*, signer: str, csr: x509.CertificateSigningRequest,
                       usages: Sequence[str]) -> None:
    """Raise SignerRuleError when the CSR may not be signed by `signer` (the kubelet
    signers' `IsKubeletClientCSR` / `IsKubeletServingCSR` checks)."""
    wanted = set(usages)
    if signer == KUBE_APISERVER_CLIENT:
        if "client auth" not in wanted:
            raise SignerRuleError("usages did not contain client auth")
        if not wanted <= _CLIENT_ALLOWED:
            raise SignerRuleError(f"usages not allowed: {sorted(wanted - _CLIENT_ALLOWED)}")
        return
    organizations, name = _organizations(csr), _common_name(csr)
    if organizations != [NODES_GROUP]:
        raise SignerRuleError("subject organization is not system:nodes")
    if not name.startswith(NODE_PREFIX):
        raise SignerRuleError('subject common name does not begin with "system:node:"')
    san = _san(csr)
    if signer == KUBE_APISERVER_CLIENT_KUBELET:
        if san is not None and len(list(san)):
            raise SignerRuleError("subject alternative names are not allowed")
        if not _KUBELET_CLIENT_REQUIRED <= wanted or not wanted <= _CLIENT_ALLOWED:
            raise SignerRuleError(
                f"usages did not match {sorted(_KUBELET_CLIENT_REQUIRED | _KEY_USAGES)}")
        return
    if signer == KUBELET_SERVING:
        if san is None or not (san.get_values_for_type(x509.DNSName)
                               or san.get_values_for_type(x509.IPAddress)):
            raise SignerRuleError("DNS or IP subjectAltName is required")
        if san.get_values_for_type(x509.RFC822Name) or \
                san.get_values_for_type(x509.UniformResourceIdentifier):
            raise SignerRuleError("email and URI subjectAltNames are not allowed")
        if not _KUBELET_SERVING_REQUIRED <= wanted or not wanted <= _SERVING_ALLOWED:
            raise SignerRuleError(
                f"usages did not match {sorted(_KUBELET_SERVING_REQUIRED | _KEY_USAGES)}")
        return
    raise SignerRuleError(f"unknown signer {signer}")


def lifetime(*, expiration_seconds: int | None, max_duration: float) -> datetime.timedelta:
    """The certificate's validity: the CSR's expirationSeconds (at least 600 s), capped
    by --cluster-signing-duration."""
    seconds = max_duration
    if expiration_seconds is not None:
        seconds = min(max(expiration_seconds, MIN_EXPIRATION_SECONDS), max_duration)
    return datetime.timedelta(seconds=seconds)


_EKU = {"client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
        "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
        "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
        "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
        "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
        "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING}


def sign(*, issuer: Issuer, csr: x509.CertificateSigningRequest, usages: Sequence[str],
         valid_for: datetime.timedelta, now: datetime.datetime | None = None) -> bytes:
    """The PEM certificate for `csr`'s subject, key and SANs, with `usages`, issued by
    `issuer` and valid from 5 minutes ago for `valid_for` (never past the CA's end)."""
    start = (now or datetime.datetime.now(datetime.UTC)) - _BACKDATE
    end = min(start + _BACKDATE + valid_for, issuer.cert.not_valid_after_utc)
    public_key = csr.public_key()
    if not isinstance(public_key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey
                      | ed25519.Ed25519PublicKey):
        raise SignerRuleError("unsupported public key type")
    wanted = set(usages)
    builder = (x509.CertificateBuilder()
               .subject_name(csr.subject).issuer_name(issuer.cert.subject)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   issuer.key.public_key()), critical=False))
    bits = {"digital_signature": bool(wanted & {"digital signature", "signing"}),
            "content_commitment": "content commitment" in wanted,
            "key_encipherment": "key encipherment" in wanted,
            "data_encipherment": "data encipherment" in wanted,
            "key_agreement": "key agreement" in wanted}
    if any(bits.values()):  # none asked: no extension (Go's x509 omits a zero KeyUsage)
        builder = builder.add_extension(x509.KeyUsage(
            **bits, key_cert_sign=False, crl_sign=False, encipher_only=False,
            decipher_only=False), critical=True)
    ekus = [_EKU[u] for u in usages if u in _EKU]
    if ekus:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ekus), critical=False)
    san = _san(csr)
    if san is not None and len(list(san)):
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(issuer.key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)


def node_name(csr: x509.CertificateSigningRequest) -> str:
    """`<name>` of a kubelet CSR's `system:node:<name>` subject ("" when not one)."""
    name = _common_name(csr)
    return name[len(NODE_PREFIX):] if name.startswith(NODE_PREFIX) else ""




def serving_names_allowed(csr: x509.CertificateSigningRequest, node: Mapping[str, Any]) -> bool:
    """Whether every IP and DNS name of a serving CSR is one of the Node's
    `status.addresses` (or, for DNS, the Node's name)."""
    status = node.get("status") or {}
    known = {str(a.get("address")) for a in status.get("addresses") or []
             if isinstance(a, dict)}
    known.add(str((node.get("metadata") or {}).get("name", "")))
    san = _san(csr)
    if san is None:
        return False
    names = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    names += san.get_values_for_type(x509.DNSName)
    return bool(names) and all(n in known for n in names)
