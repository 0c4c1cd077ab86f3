"""A client certificate proved on gRPC by a token its key signs (SPEC AU1).

Why it exists: Kubernetes' apiserver *asks* for a client certificate and also serves
callers without one (answering them 401). grpcio cannot do that: its server credentials
either require a certificate (a caller without one fails the TLS handshake and never gets a
401) or do not ask for one at all. So the gRPC port asks for none, and a client that holds
a certificate proves it on every call instead: a short-lived JWT (RFC 7515/7519, as RFC
7523 uses a key-signed JWT to authenticate a client) whose `x5c` header carries the
certificate and whose signature is made with the certificate's private key. The apiserver
checks that the cluster CA issued the certificate (as it checks a TLS peer's) and that the
token is signed by that certificate's key, for its audience, and not expired; the user is
the certificate's, as over mutual TLS. The token travels only inside TLS to a server whose
certificate the client verified, and lives a few minutes: a client signs tokens for
LIFETIME_SECONDS and signs a new one when half of that has passed (`CertificateTokens`,
which every Skiff client uses through `skiff.client.Credentials.bearer`); the apiserver
refuses a token meant to live longer than MAX_LIFETIME_SECONDS (its `exp - iat`, or its
`exp` further ahead than that plus the clock leeway), so a token copied from a request is
worth minutes, not years.

Signing uses PyJWT (already the ServiceAccount tokens' library) over `cryptography`.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "skiff-apiserver"
LIFETIME_SECONDS = 300.0
# The longest lifetime the apiserver accepts (the apiserver's
# --certificate-token-max-lifetime); Skiff's own clients sign for LIFETIME_SECONDS.
MAX_LIFETIME_SECONDS = LIFETIME_SECONDS
# Clocks of the processes of one cluster may differ a little (compose containers, hosts).
LEEWAY_SECONDS = 30.0
_ALGORITHMS = ["ES256", "RS256"]


def pair_stamp(cert_file: Path, key_file: Path) -> tuple[int, int]:
    """What changes when a certificate/key pair's files are replaced (a rename gives a new
    inode, a rewrite a new mtime): compared to notice a renewal (SPEC JN2)."""
    cert, key = cert_file.stat(), key_file.stat()
    return cert.st_mtime_ns ^ cert.st_ino, key.st_mtime_ns ^ key.st_ino


def check_pair(cert: x509.Certificate, key: Any, *, cert_file: Path, key_file: Path) -> None:
    """ValueError unless `key` is the private key of `cert` (a pair read between the two
    renames of a renewal is not)."""
    if cert.public_key() != key.public_key():
        raise ValueError(f"{key_file} is not the key of {cert_file}")


class CertificateTokens:
    """Signs this client's tokens, re-signing when half the lifetime has passed, and with
    a new certificate as soon as its files are replaced (a kubelet renewing its client
    certificate, SPEC JN2): a pair whose key does not match its certificate (caught
    between the two renames) is not taken; the old one serves until the next call."""

    def __init__(self, cert_file: str | Path, key_file: str | Path, *,
                 lifetime: float = LIFETIME_SECONDS) -> None:
        self._files = (Path(cert_file), Path(key_file))
        self._stamp = pair_stamp(*self._files)
        self._load(replaced=False)
        self._lifetime = lifetime
        self._lock = threading.Lock()  # grpc may ask from its own threads
        self._token = ""
        self._renew_at = 0.0

    def _load(self, *, replaced: bool) -> None:
        cert_file, key_file = self._files
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            self._algorithm = "ES256"
        elif isinstance(key, rsa.RSAPrivateKey):
            self._algorithm = "RS256"
        else:
            raise ValueError(f"{key_file}: a client key must be EC P-256 or RSA")
        if replaced:
            check_pair(cert, key, cert_file=cert_file, key_file=key_file)
        self._key = key
        self._x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]

    def _reload_if_replaced(self) -> bool:
        try:
            stamp = pair_stamp(*self._files)
            if stamp == self._stamp:
                return False
            self._load(replaced=True)
        except (OSError, ValueError):
            return False  # mid-replacement: keep the pair we have
        self._stamp = stamp
        return True

    def token(self) -> str:
        now = time.time()
        with self._lock:
            if self._reload_if_replaced() or now >= self._renew_at:
                self._token = jwt.encode(
                    {"aud": AUDIENCE, "iat": int(now), "exp": int(now + self._lifetime)},
                    self._key, algorithm=self._algorithm, headers={"x5c": self._x5c})
                self._renew_at = now + self._lifetime / 2
            return self._token


def presented_certificate(token: str) -> bytes | None:
    """The DER certificate a token says it was signed for (not yet verified), or None when
    the token is not a certificate token (a static or ServiceAccount bearer token)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return None
    chain = header.get("x5c")
    if not isinstance(chain, list) or not chain or not isinstance(chain[0], str):
        return None
    try:
        return base64.b64decode(chain[0], validate=True)
    except ValueError:
        return None


def signed_by(token: str, der: bytes, *, max_age: float = MAX_LIFETIME_SECONDS,
              now: float | None = None) -> float | None:
    """When `token` expires (epoch seconds), if it is signed with the key of the
    certificate `der`, for this audience, current, and meant to live at most `max_age`
    seconds; else None. The caller checks the certificate itself against the cluster CA
    (and its validity, on every use)."""
    try:
        public_key = x509.load_der_x509_certificate(der).public_key()
        if not isinstance(public_key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
            return None
        claims = jwt.decode(token, public_key, algorithms=_ALGORITHMS, audience=AUDIENCE,
                            leeway=LEEWAY_SECONDS, options={"require": ["exp", "iat", "aud"]})
    except (jwt.PyJWTError, ValueError):
        return None
    issued, expires = claims["iat"], claims["exp"]
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool)
               for t in (issued, expires)):
        return None
    current = time.time() if now is None else now
    if expires - issued > max_age or expires > current + max_age + LEEWAY_SECONDS:
        return None
    return float(expires)
