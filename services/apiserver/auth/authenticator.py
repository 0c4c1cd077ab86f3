"""Authentication for both fronts (SPEC AU1, AU9): who a request is.

The gRPC and HTTPS fronts authenticate each request with `Authenticator` (a client
certificate signed by the cluster CA, a bearer token from `--token-auth-file`, or a
ServiceAccount token) and put the user in `context.current_user` for the request's task.
Without `--tls-cert-file` the apiserver runs in the insecure mode: nothing is checked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from skiff.apiserver.auth.bootstraptoken import BootstrapTokens, looks_like_bootstrap_token
from skiff.apiserver.auth.satoken import GetObject, TokenAuthority
from skiff.auth import UserInfo, load_token_file
from skiff.certtoken import LEEWAY_SECONDS, MAX_LIFETIME_SECONDS, presented_certificate, signed_by
from skiff.pki import identity_of


class Authenticator:
    """Client certificates (verified against the cluster CA), static bearer tokens and
    ServiceAccount tokens, each checked in full on every request (SPEC AU9).

    A certificate, presented in the TLS handshake (HTTPS) or proved by a certificate token
    (gRPC, skiff.certtoken), counts as Kubernetes' x509 authenticator counts it: issued by
    the cluster CA, within its validity period *now* (a long-lived connection or a cached
    token does not outlive it) and usable for client authentication (an extended key usage
    that names clientAuth or any usage, or none at all, as Go's verifier allows; a
    serving-only certificate is no identity). Certificate tokens may live at most
    `certificate_token_max_age` seconds. A ServiceAccount token must still be bound to
    live objects (`TokenAuthority.validate` with `bound_objects`)."""

    def __init__(self, *, client_ca_file: Path, token_auth_file: Path | None = None,
                 service_accounts: TokenAuthority | None = None,
                 bound_objects: GetObject | None = None,
                 certificate_token_max_age: float = MAX_LIFETIME_SECONDS,
                 bootstrap_tokens: BootstrapTokens | None = None) -> None:
        if service_accounts is not None and bound_objects is None:
            raise ValueError("ServiceAccount tokens need the objects they are bound to")
        self._ca = x509.load_pem_x509_certificate(client_ca_file.read_bytes())
        self._tokens = load_token_file(token_auth_file) if token_auth_file else {}
        self._service_accounts = service_accounts
        self._bound_objects = bound_objects
        self._certificate_token_max_age = certificate_token_max_age
        self._bootstrap_tokens = bootstrap_tokens  # SPEC JN3, when enabled
        # DER -> the certificate's user and validity once its signature and usage are
        # verified (None: they are not); the validity period is checked on every use.
        self._verified: dict[bytes, _Verified | None] = {}
        # certificate token -> (its certificate, its expiry) once its signature is checked
        self._tokens_seen: dict[str, tuple[bytes, float] | None] = {}

    def _verify(self, cert: x509.Certificate) -> _Verified | None:
        """What does not change with time: the CA's signature, the clientAuth usage (of the
        certificate and the CA, as Go checks a chain) and a user name."""
        try:
            cert.verify_directly_issued_by(self._ca)
        except (ValueError, TypeError, Exception):
            return None
        if not (_client_auth_allowed(cert) and _client_auth_allowed(self._ca)):
            return None
        ident = identity_of(cert.public_bytes(serialization.Encoding.PEM))
        if not ident.user:
            return None
        start = max(cert.not_valid_before_utc, self._ca.not_valid_before_utc)
        end = min(cert.not_valid_after_utc, self._ca.not_valid_after_utc)
        return _Verified(UserInfo(ident.user, groups=ident.groups).with_authenticated(),
                         start.timestamp(), end.timestamp())

    def from_certificate(self, cert: x509.Certificate) -> UserInfo | None:
        """The user a certificate names, if the cluster CA issued it for client
        authentication and it is current."""
        return self.from_der(cert.public_bytes(serialization.Encoding.DER))

    def from_der(self, der: bytes) -> UserInfo | None:
        if der not in self._verified:
            if len(self._verified) > 1024:
                self._verified.clear()
            try:
                cert = x509.load_der_x509_certificate(der)
            except ValueError:
                self._verified[der] = None
            else:
                self._verified[der] = self._verify(cert)
        verified = self._verified[der]
        if verified is None or not verified.not_before <= time.time() <= verified.not_after:
            return None
        return verified.user

    def from_pem(self, pem: bytes) -> UserInfo | None:
        try:
            cert = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return None
        return self.from_certificate(cert)

    async def from_authorization(self, header: str) -> UserInfo | None:
        """`Bearer <token>`: a certificate token (skiff.certtoken: the certificate's user,
        if the cluster CA issued it and its key signed the token), from the static token
        file, else a ServiceAccount token this cluster signed
        (system:serviceaccount:<namespace>:<name>) whose bound objects still stand."""
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        if token.count(".") == 2:  # a JWT: a certificate token, or a ServiceAccount's
            certificate_token, user = self._certificate_token_user(token)
            if certificate_token:
                return user
        user = self._tokens.get(token)
        if user is None and self._bootstrap_tokens is not None \
                and looks_like_bootstrap_token(token):
            return await self._bootstrap_tokens.authenticate(token)
        if user is None and self._service_accounts is not None \
                and self._bound_objects is not None:
            user = await self._service_accounts.validate(token, self._bound_objects)
        return user.with_authenticated() if user else None

    def _certificate_token_user(self, token: str) -> tuple[bool, UserInfo | None]:
        """(is it a certificate token, its user if it proves a current certificate). The
        token's signature is checked once (a client re-signs every few minutes) and
        remembered; its expiry and its certificate's validity on every use."""
        if token not in self._tokens_seen:
            der = presented_certificate(token)
            if der is None:
                return False, None
            if len(self._tokens_seen) > 4096:
                self._tokens_seen.clear()
            expires = signed_by(token, der, max_age=self._certificate_token_max_age)
            self._tokens_seen[token] = (der, expires) if expires is not None else None
        seen = self._tokens_seen[token]
        if seen is None or time.time() > seen[1] + LEEWAY_SECONDS:
            return True, None
        return True, self.from_der(seen[0])


@dataclass(frozen=True)
class _Verified:
    user: UserInfo
    not_before: float  # epoch seconds, of the certificate and its CA
    not_after: float


def _client_auth_allowed(cert: x509.Certificate) -> bool:
    """Go's x509 rule for ExtKeyUsageClientAuth: no extended key usage at all, or one
    that lists clientAuth or anyExtendedKeyUsage."""
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return (ExtendedKeyUsageOID.CLIENT_AUTH in usages
            or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages)
