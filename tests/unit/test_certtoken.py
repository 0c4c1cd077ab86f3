"""SPEC AU1 on gRPC: a client's certificate is proved by a token its key signs
(skiff.certtoken) — what the apiserver accepts and what it refuses."""

from __future__ import annotations

from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from skiff.certtoken import (
    AUDIENCE,
    MAX_LIFETIME_SECONDS,
    CertificateTokens,
    presented_certificate,
    signed_by,
)
from skiff.pki import ensure_pki


def _der(cert_file: Path) -> bytes:
    return x509.load_pem_x509_certificate(cert_file.read_bytes()).public_bytes(
        serialization.Encoding.DER)


def test_AU1_a_token_carries_its_certificate_and_is_signed_by_its_key(tmp_path: Path) -> None:
    admin = ensure_pki(tmp_path / "pki").admin
    token = CertificateTokens(admin.cert, admin.key).token()
    assert presented_certificate(token) == _der(admin.cert)
    assert signed_by(token, _der(admin.cert)) is not None


def test_AU1_a_token_signed_by_another_key_proves_nothing(tmp_path: Path) -> None:
    admin = ensure_pki(tmp_path / "pki").admin
    other = ensure_pki(tmp_path / "other").admin
    token = CertificateTokens(admin.cert, other.key).token()  # the certificate, not its key
    assert signed_by(token, _der(admin.cert)) is None


def test_AU1_an_expired_token_or_one_for_another_audience_is_refused(tmp_path: Path) -> None:
    admin = ensure_pki(tmp_path / "pki").admin
    expired = CertificateTokens(admin.cert, admin.key, lifetime=-120).token()
    assert signed_by(expired, _der(admin.cert)) is None
    key = serialization.load_pem_private_key(admin.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)  # ES256
    header = jwt.get_unverified_header(CertificateTokens(admin.cert, admin.key).token())
    elsewhere = jwt.encode({"aud": "another-service", "iat": 0, "exp": 2**40}, key,
                           algorithm="ES256", headers={"x5c": header["x5c"]})
    assert AUDIENCE != "another-service" and signed_by(elsewhere, _der(admin.cert)) is None


def test_AU1_bearer_tokens_that_are_not_certificate_tokens_are_left_to_the_token_file() -> None:
    assert presented_certificate("token-bob") is None
    unsigned = jwt.encode({"sub": "x"}, "s" * 64, algorithm="HS256")
    assert presented_certificate(unsigned) is None


def test_AU1_tokens_are_reused_until_half_their_life_is_gone(tmp_path: Path) -> None:
    admin = ensure_pki(tmp_path / "pki").admin
    tokens = CertificateTokens(admin.cert, admin.key)
    assert tokens.token() == tokens.token()


def test_au9_a_token_meant_to_live_longer_than_the_maximum_is_refused(tmp_path: Path) -> None:
    """The client chooses `exp`; the apiserver accepts at most MAX_LIFETIME_SECONDS (a
    century-long token copied from one request would otherwise be a century's access)."""
    admin = ensure_pki(tmp_path / "pki").admin
    century = CertificateTokens(admin.cert, admin.key,
                                lifetime=100 * 365 * 24 * 3600.0).token()
    assert signed_by(century, _der(admin.cert)) is None
    usual = CertificateTokens(admin.cert, admin.key).token()
    assert signed_by(usual, _der(admin.cert)) is not None
    just_over = CertificateTokens(admin.cert, admin.key,
                                  lifetime=MAX_LIFETIME_SECONDS + 60).token()
    assert signed_by(just_over, _der(admin.cert)) is None
    assert signed_by(just_over, _der(admin.cert), max_age=MAX_LIFETIME_SECONDS + 60)
