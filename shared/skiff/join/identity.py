"""The identity a joined node already holds (SPEC JN3): whether `skiff join`, run again for
the same node name and data dir (a restarted node container, a fenced node started again),
can start the kubelet with the client certificate it has, as Kubernetes' kubelet starts
with an existing `--kubeconfig` and bootstraps only when that one is missing or no longer
valid (`LoadClientConfig` / `isClientConfigStillValid`).

Held credentials are usable when the CA in the data dir is one the join line pins, the
client certificate is signed by it, names `system:node:<name>` in `system:nodes`, is
within its validity period, and the key is its key. Anything else is stale: the caller
bootstraps again as a newcomer (and the taken-name check applies), saying why.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import NameOID

from skiff.bootstraptoken import TokenError, ca_matches
from skiff.join.node import NodeFiles

__all__ = ["Held", "HeldIdentity", "held_identity"]

NODES_GROUP = "system:nodes"


@dataclass(frozen=True)
class HeldIdentity:
    """Valid credentials of this node in its data dir."""

    ca_pem: bytes
    server: str  # the node kubeconfig's server (cluster-info's when it joined)
    not_after: datetime.datetime


@dataclass(frozen=True)
class Held:
    """held_identity's answer: `identity` when usable; else `stale` says why the files
    there cannot be used ("" when there are none)."""

    identity: HeldIdentity | None = None
    stale: str = ""


def _names(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in name.get_attributes_for_oid(oid)]


def _public(key: PublicKeyTypes) -> bytes:
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def _server(files: NodeFiles) -> str:
    try:
        config = yaml.safe_load(files.kubeconfig.read_text()) or {}
        return str(((config.get("clusters") or [{}])[0].get("cluster") or {})
                   .get("server") or "")
    except (OSError, yaml.YAMLError, AttributeError, IndexError):
        return ""


def _problem(files: NodeFiles, *, node_name: str, ca_hashes: list[str],
             now: datetime.datetime) -> tuple[str, bytes, x509.Certificate | None]:
    """(why the held files are unusable or "", the CA's PEM, the client certificate)."""
    try:
        ca_pem = files.ca_file.read_bytes()
        ca = x509.load_pem_x509_certificate(ca_pem)
    except (OSError, ValueError):
        return f"its CA {files.ca_file} cannot be read", b"", None
    try:
        if not ca_matches(ca_pem, ca_hashes):
            return "its CA is not the one --discovery-token-ca-cert-hash pins", ca_pem, None
    except TokenError as err:
        return str(err), ca_pem, None
    try:
        cert = x509.load_pem_x509_certificate(files.client.cert_file.read_bytes())
        key = serialization.load_pem_private_key(files.client.key_file.read_bytes(),
                                                 password=None)
    except (OSError, ValueError, TypeError):
        return "its client certificate or key cannot be read", ca_pem, None
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "its client certificate is not signed by its CA", ca_pem, cert
    user = _names(cert.subject, NameOID.COMMON_NAME)
    if user != [f"system:node:{node_name}"] or \
            NODES_GROUP not in _names(cert.subject, NameOID.ORGANIZATION_NAME):
        return (f"its client certificate is {', '.join(user) or 'nobody'}'s, not "
                f"system:node:{node_name}'s in {NODES_GROUP}"), ca_pem, cert
    if now < cert.not_valid_before_utc:
        return (f"its client certificate is not valid before "
                f"{cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"), ca_pem, cert
    if now >= cert.not_valid_after_utc:
        return (f"its client certificate expired at "
                f"{cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"), ca_pem, cert
    if _public(key.public_key()) != _public(cert.public_key()):
        return "its client key does not match its certificate", ca_pem, cert
    return "", ca_pem, cert


def held_identity(files: NodeFiles, *, node_name: str, ca_hashes: list[str],
                  now: datetime.datetime | None = None) -> Held:
    """The credentials `files` hold for `node_name`, if the kubelet can start with them."""
    if not files.client.cert_file.exists():
        return Held()
    now = now or datetime.datetime.now(datetime.UTC)
    problem, ca_pem, cert = _problem(files, node_name=node_name, ca_hashes=ca_hashes,
                                     now=now)
    if problem or cert is None:
        return Held(stale=problem or "its client certificate cannot be read")
    return Held(identity=HeldIdentity(ca_pem=ca_pem, server=_server(files),
                                      not_after=cert.not_valid_after_utc))
