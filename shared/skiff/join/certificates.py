"""A kubelet's certificates by CertificateSigningRequest (SPEC JN2), as the kubelet's
`certificate/bootstrap` and certificate manager get them: a fresh EC P-256 key, a CSR for
`system:node:<name>` in `system:nodes` (a client certificate from
`kubernetes.io/kube-apiserver-client-kubelet`, or a serving one with the node's address and
name from `kubernetes.io/kubelet-serving`), waited for until approved and signed, and the
pair written so a reader never sees a key without its certificate.

Also when to renew: Kubernetes' kubelet renews once a jittered 70–90 % of the
certificate's lifetime has passed (`rotation_deadline`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from skiff.api import ApiError
from skiff.api.groups import certificates as csrs
from skiff.client.interface import Client
from skiff.pki import alt_names, key_pem, new_key, x509_name

__all__ = ["CLIENT_USAGES", "SERVING_USAGES", "CertificateRequestError", "KeyPair",
           "build_request", "key_pem", "new_key", "request_certificate", "rotation_deadline",
           "write_pair"]

NODES_GROUP = "system:nodes"
CLIENT_USAGES = ["digital signature", "client auth"]  # the kubelet's, ECDSA keys
SERVING_USAGES = ["digital signature", "server auth"]


class CertificateRequestError(Exception):
    """The CSR was denied, failed or not signed in time; the text says what to do."""


@dataclass(frozen=True)
class KeyPair:
    cert_file: Path
    key_file: Path


def build_request(key: ec.EllipticCurvePrivateKey, *, node_name: str,
                  addresses: list[str] | None = None) -> bytes:
    """The PEM CSR of `system:node:<node_name>` (O=system:nodes); with `addresses` (IPs or
    DNS names) a serving CSR naming them."""
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509_name(f"system:node:{node_name}", [NODES_GROUP]))
    if addresses:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names(addresses)),
                                        critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr_object(*, name: str, request_pem: bytes, signer: str, usages: list[str],
               expiration_seconds: int | None) -> dict[str, object]:
    spec: dict[str, object] = {"request": base64.b64encode(request_pem).decode(),
                               "signerName": signer, "usages": usages}
    if expiration_seconds:
        spec["expirationSeconds"] = expiration_seconds
    return {"apiVersion": f"{csrs.GROUP}/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": name} if name.endswith("-") else {"name": name},
            "spec": spec}


async def request_certificate(api: Client, *, name: str, request_pem: bytes,
                              signer: str, usages: list[str], timeout: float,
                              expiration_seconds: int | None = None,
                              poll: float = 0.5) -> tuple[str, bytes]:
    """Create the CSR (`name` ending in "-": a generated name) and wait until it is
    signed: (its name, the PEM certificate). CertificateRequestError when it is denied,
    fails, or is not signed within `timeout`."""
    made = await api.create(csr_object(name=name, request_pem=request_pem, signer=signer,
                                       usages=usages, expiration_seconds=expiration_seconds))
    csr_name = str(made["metadata"]["name"])
    deadline = time.monotonic() + timeout
    current = made
    while True:
        for type_ in (csrs.DENIED, csrs.FAILED):
            if csrs.has_condition(current, type_):
                message = next((str(c.get("message") or c.get("reason") or "")
                                for c in csrs.conditions(current)
                                if c.get("type") == type_), "")
                raise CertificateRequestError(
                    f"certificate signing request {csr_name} was {type_.lower()}"
                    + (f": {message}" if message else ""))
        cert = (current.get("status") or {}).get("certificate")
        if cert:
            return csr_name, csrs.decode_bytes(cert)
        if time.monotonic() >= deadline:
            approved = csrs.has_condition(current, csrs.APPROVED)
            raise CertificateRequestError(
                f"timed out after {timeout:g}s waiting for certificate signing request "
                f"{csr_name} ({signer}) to be "
                + ("signed: is the controller-manager's csrsigning controller running with "
                   "--cluster-signing-cert-file?" if approved else
                   f"approved and signed; approve it by hand with `kubectl certificate "
                   f"approve {csr_name}`"))
        await asyncio.sleep(poll)
        try:
            current = await api.get("certificatesigningrequests", csr_name)
        except ApiError as err:
            raise CertificateRequestError(
                f"cannot read certificate signing request {csr_name}: {err.message}") \
                from None


def write_pair(pair: KeyPair, *, cert_pem: bytes, key: ec.EllipticCurvePrivateKey) -> None:
    """Both files replaced by rename (the key 0600, written first); a reader that loads
    them between the two renames sees a key that does not match the certificate and keeps
    the pair it had (see skiff.certtoken)."""
    for path, data, mode in ((pair.key_file, key_pem(key), 0o600),
                             (pair.cert_file, cert_pem, 0o644)):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)


def rotation_deadline(cert: x509.Certificate, *, fraction: float = 0.0,
                      rand: random.Random | None = None) -> datetime.datetime:
    """When to renew: `fraction` of the lifetime after notBefore, or (0) a jittered 70–90 %
    as Kubernetes' certificate manager picks it."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    share = fraction if fraction > 0 else 0.7 + 0.2 * (rand or random).random()
    return start + (end - start) * share
