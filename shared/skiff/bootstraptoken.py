"""Bootstrap tokens (SPEC JN3): what every side of TLS bootstrapping agrees on.

A bootstrap token `<id>.<secret>` lives in a `bootstrap.kubernetes.io/token` Secret
`bootstrap-token-<id>` in kube-system (Kubernetes' cluster-bootstrap token/api and
token/util). The apiserver's authenticator, the tokencleaner and bootstrapsigner
controllers, `skiff token` and (next) `skiff join` all read tokens through this module: the
token format, the Secret's keys and their validation, expiry, the detached JWS that signs
`cluster-info` (HS256 keyed by the token secret, cluster-bootstrap token/jws) and the
`--discovery-token-ca-cert-hash` (SHA-256 of the CA's DER SubjectPublicKeyInfo, kubeadm's
pubkeypin). Kubernetes does not validate these Secrets on write; their consumers ignore one
that does not validate, and so do Skiff's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from skiff.api.types import Obj, ObjView
from skiff.clock import parse_rfc3339, rfc3339

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NAMESPACE = "kube-system"
TOKEN_ID_KEY = "token-id"
TOKEN_SECRET_KEY = "token-secret"
DESCRIPTION_KEY = "description"
EXPIRATION_KEY = "expiration"
EXTRA_GROUPS_KEY = "auth-extra-groups"
USAGE_PREFIX = "usage-bootstrap-"
USAGE_AUTHENTICATION = "authentication"
USAGE_SIGNING = "signing"
KNOWN_USAGES = (USAGE_AUTHENTICATION, USAGE_SIGNING)
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"
DEFAULT_NODE_GROUP = "system:bootstrappers:skiff:default-node-token"

CLUSTER_INFO = "cluster-info"  # the ConfigMap in kube-public
CLUSTER_INFO_NAMESPACE = "kube-public"
KUBECONFIG_KEY = "kubeconfig"
JWS_PREFIX = "jws-kubeconfig-"
CLUSTER_INFO_PATH = f"/api/v1/namespaces/{CLUSTER_INFO_NAMESPACE}/configmaps/{CLUSTER_INFO}"
# the controller-manager's --controllers under `skiff up` (kubeadm enables the same two)
BOOTSTRAP_CONTROLLERS = "*,bootstrapsigner,tokencleaner"

TOKEN_RE = re.compile(r"\A([a-z0-9]{6})\.([a-z0-9]{16})\Z")
TOKEN_ID_RE = re.compile(r"\A[a-z0-9]{6}\Z")
TOKEN_SECRET_RE = re.compile(r"\A[a-z0-9]{16}\Z")
GROUP_RE = re.compile(r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\Z")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


class TokenError(ValueError):
    """A token, usage, group or hash a user gave is malformed (kubeadm's message)."""


@dataclass(frozen=True)
class Token:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"

    @property
    def secret_name(self) -> str:
        return f"{SECRET_PREFIX}{self.id}"


def parse_token(text: str) -> Token:
    """`<id>.<secret>`, as kubeadm's NewBootstrapTokenString checks it."""
    match = TOKEN_RE.match(text)
    if match is None:
        raise TokenError(f"the bootstrap token {text!r} was not of the form "
                         f"{TOKEN_RE.pattern[2:-2]!r}")
    return Token(match.group(1), match.group(2))


def generate_token() -> Token:
    """A fresh token from a cryptographic random source ([a-z0-9], 6 + 16 characters)."""
    pick = secrets.choice
    return Token("".join(pick(_ALPHABET) for _ in range(6)),
                 "".join(pick(_ALPHABET) for _ in range(16)))


def validate_group(group: str) -> None:
    if not GROUP_RE.match(group):
        raise TokenError(f"bootstrap group {group!r} is invalid (must match "
                         f"{GROUP_RE.pattern})")


def validate_usages(usages: list[str]) -> None:
    bad = [u for u in usages if u not in KNOWN_USAGES]
    if bad:
        raise TokenError(f"invalid bootstrap token usage string: {','.join(bad)}, valid "
                         f"usage options: {','.join(KNOWN_USAGES)}")


def secret_data(secret: ObjView, key: str) -> str:
    """One key of the Secret's data, decoded ("" when absent or not base64)."""
    value = (secret.get("data") or {}).get(key)
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def expiration(secret: ObjView) -> float | None:
    """Epoch seconds the token expires at; None when it never does; -inf when the
    `expiration` is not RFC 3339 (Kubernetes counts such a token as expired)."""
    text = secret_data(secret, EXPIRATION_KEY)
    if not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        return float("-inf")


def has_expired(secret: ObjView, now: float | None = None) -> bool:
    expires = expiration(secret)
    return expires is not None and (time.time() if now is None else now) > expires


def groups_of(secret: ObjView) -> list[str]:
    """system:bootstrappers and the `auth-extra-groups`, sorted, each validated
    (cluster-bootstrap secret.GetGroups); TokenError names an invalid one."""
    groups = {DEFAULT_GROUP}
    extra = secret_data(secret, EXTRA_GROUPS_KEY)
    if extra:
        for group in extra.split(","):
            validate_group(group)
            groups.add(group)
    return sorted(groups)


def usable_token(secret: ObjView, usage: str, *, now: float | None = None) -> Token | None:
    """The Secret's token when it is a valid bootstrap token Secret, named for its id, not
    being deleted, unexpired and marked for `usage`; None otherwise."""
    meta = secret.get("metadata") or {}
    if secret.get("type") != SECRET_TYPE or meta.get("deletionTimestamp"):
        return None
    token_id = secret_data(secret, TOKEN_ID_KEY)
    token_secret = secret_data(secret, TOKEN_SECRET_KEY)
    if not TOKEN_ID_RE.match(token_id) or not TOKEN_SECRET_RE.match(token_secret) \
            or meta.get("name") != f"{SECRET_PREFIX}{token_id}":
        return None
    if has_expired(secret, now) or secret_data(secret, USAGE_PREFIX + usage) != "true":
        return None
    return Token(token_id, token_secret)


def token_secret(token: Token, *, ttl: float, usages: list[str], groups: list[str],
                 description: str = "", now: float | None = None) -> Obj:
    """The Secret `skiff token create` writes (kubeadm's BootstrapToken.ToSecret); `ttl` 0
    means it never expires."""
    validate_usages(usages)
    for group in groups:
        validate_group(group)
    data = {TOKEN_ID_KEY: token.id, TOKEN_SECRET_KEY: token.secret}
    if description:
        data[DESCRIPTION_KEY] = description
    if ttl > 0:
        data[EXPIRATION_KEY] = rfc3339((time.time() if now is None else now) + ttl)
    for usage in usages:
        data[USAGE_PREFIX + usage] = "true"
    if groups:
        data[EXTRA_GROUPS_KEY] = ",".join(groups)
    return {"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
            "metadata": {"name": token.secret_name, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


# -- the detached JWS over cluster-info's kubeconfig -----------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_detached(content: str, token: Token) -> str:
    """The compact JWS of `content` with its payload left out (`header..signature`), HS256
    keyed by the token secret, the token id as `kid`: cluster-bootstrap's
    ComputeDetachedSignature."""
    header = _b64(json.dumps({"alg": "HS256", "kid": token.id},
                             separators=(",", ":")).encode())
    signing_input = f"{header}.{_b64(content.encode())}".encode()
    mac = hmac.new(token.secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}..{_b64(mac)}"


def verify_detached(signature: str, content: str, token: Token) -> bool:
    """Whether `signature` is a detached HS256 JWS of `content` by this token (its `kid`,
    when present, the token id); the MAC is compared in constant time."""
    parts = signature.split(".")
    if len(parts) != 3 or parts[1]:
        return False
    try:
        header = json.loads(_unb64(parts[0]))
        mac = _unb64(parts[2])
    except (ValueError, binascii.Error):
        return False
    if not isinstance(header, dict) or header.get("alg") != "HS256" \
            or header.get("kid", token.id) != token.id:
        return False
    signing_input = f"{parts[0]}.{_b64(content.encode())}".encode()
    expected = hmac.new(token.secret.encode(), signing_input, hashlib.sha256).digest()
    return hmac.compare_digest(expected, mac)


def signatures_of(data: Mapping[str, str]) -> dict[str, str]:
    """token id -> signature, from cluster-info's `jws-kubeconfig-<id>` keys."""
    return {k.removeprefix(JWS_PREFIX): v for k, v in data.items() if k.startswith(JWS_PREFIX)}


# -- the CA pin --------------------------------------------------------------------------


def ca_cert_hash(ca_pem: bytes) -> str:
    """`sha256:<hex>` of the first certificate's DER SubjectPublicKeyInfo (kubeadm's
    `--discovery-token-ca-cert-hash`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def ca_matches(ca_pem: bytes, pins: list[str]) -> bool:
    """Whether the CA's hash is one of `pins` (`sha256:<hex>`, case-insensitive)."""
    for pin in pins:
        kind, _, value = pin.partition(":")
        if kind.lower() != "sha256" or not re.fullmatch(r"[0-9a-fA-F]{64}", value):
            raise TokenError(f"invalid hash {pin!r}: expected a \"sha256:\" prefix and 64 "
                             "hex digits")
    mine = ca_cert_hash(ca_pem)
    return any(hmac.compare_digest(mine, "sha256:" + p.partition(":")[2].lower())
               for p in pins)
