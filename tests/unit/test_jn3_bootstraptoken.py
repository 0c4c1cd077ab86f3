"""SPEC JN3: bootstrap tokens' pure rules — token parsing, the Secret's validation and
expiry, the detached JWS over cluster-info, the CA hash, the signer's data and `token list`."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from skiff.api.types import Obj
from skiff.bootstraptoken import (
    SECRET_TYPE,
    Token,
    TokenError,
    ca_cert_hash,
    ca_matches,
    generate_token,
    groups_of,
    has_expired,
    parse_token,
    sign_detached,
    token_secret,
    usable_token,
    validate_usages,
    verify_detached,
)
from skiff.cli.token import cluster_info_objects, token_rows
from skiff.controller_manager.bootstrap.signer import signed_data

TOKEN = Token("abcdef", "0123456789abcdef")
NOW = 1_800_000_000.0


def _secret(data: dict[str, str], *, name: str = "bootstrap-token-abcdef",
            type_: str = SECRET_TYPE) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": "kube-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _valid(**extra: str) -> Obj:
    return _secret({"token-id": "abcdef", "token-secret": "0123456789abcdef",
                    "usage-bootstrap-authentication": "true",
                    "usage-bootstrap-signing": "true", **extra})


@pytest.mark.parametrize("text", ["abcdef.0123456789abcdef", "000000.zzzzzzzzzzzzzzzz"])
def test_jn3_token_parses(text: str) -> None:
    assert str(parse_token(text)) == text


@pytest.mark.parametrize("text", ["ABCDEF.0123456789abcdef", "abcde.0123456789abcdef",
                                  "abcdef.0123456789abcde", "abcdef0123456789abcdef",
                                  "abcdef.0123456789abcdef\n", "abcdef.0123456789abcdeg.x"])
def test_jn3_malformed_token_refused(text: str) -> None:
    with pytest.raises(TokenError, match="was not of the form"):
        parse_token(text)


def test_jn3_generated_tokens_are_valid_and_differ() -> None:
    tokens = {str(generate_token()) for _ in range(20)}
    assert len(tokens) == 20
    for text in tokens:
        parse_token(text)


def test_jn3_usable_token_requires_each_rule() -> None:
    assert usable_token(_valid(), "authentication", now=NOW) == TOKEN
    assert usable_token(_valid(), "signing", now=NOW) == TOKEN
    no_auth = _secret({"token-id": "abcdef", "token-secret": "0123456789abcdef",
                       "usage-bootstrap-signing": "true"})
    assert usable_token(no_auth, "authentication", now=NOW) is None
    assert usable_token(_valid(), "authentication", now=NOW) is not None
    opaque = _valid()
    opaque["type"] = "Opaque"
    assert usable_token(opaque, "authentication", now=NOW) is None
    wrong_name = _valid()
    wrong_name["metadata"]["name"] = "bootstrap-token-zzzzzz"
    assert usable_token(wrong_name, "authentication", now=NOW) is None
    bad_secret = _valid(**{"token-secret": "short"})
    assert usable_token(bad_secret, "authentication", now=NOW) is None
    deleting = _valid()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert usable_token(deleting, "authentication", now=NOW) is None


def test_jn3_expiration_rfc3339_and_unparsable_counts_as_expired() -> None:
    later = datetime.datetime.fromtimestamp(NOW + 60, tz=datetime.UTC)
    secret = _valid(expiration=later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert not has_expired(secret, NOW)
    assert has_expired(secret, NOW + 61)
    assert usable_token(secret, "authentication", now=NOW + 61) is None
    assert not has_expired(_valid(), NOW + 1e9)  # no expiration: never
    assert has_expired(_valid(expiration="tomorrow"), NOW)
    offset = _valid(expiration="2027-01-15T10:00:00+02:00")
    assert has_expired(offset, datetime.datetime(2027, 1, 15, 8, 0, 1,
                                                 tzinfo=datetime.UTC).timestamp())


def test_jn3_groups_sorted_with_default_and_validated() -> None:
    secret = _valid(**{"auth-extra-groups": "system:bootstrappers:z,system:bootstrappers:a"})
    assert groups_of(secret) == ["system:bootstrappers", "system:bootstrappers:a",
                                 "system:bootstrappers:z"]
    assert groups_of(_valid()) == ["system:bootstrappers"]
    with pytest.raises(TokenError, match="bootstrap group 'system:masters' is invalid"):
        groups_of(_valid(**{"auth-extra-groups": "system:masters"}))
    with pytest.raises(TokenError, match="is invalid"):
        groups_of(_valid(**{"auth-extra-groups": "system:bootstrappers:a-"}))


def test_jn3_usages_validated() -> None:
    validate_usages(["signing", "authentication"])
    with pytest.raises(TokenError, match="invalid bootstrap token usage string: bogus"):
        validate_usages(["signing", "bogus"])


def test_jn3_token_secret_as_kubeadm_writes_it() -> None:
    secret = token_secret(TOKEN, ttl=3600, usages=["authentication"],
                          groups=["system:bootstrappers:x"], description="d", now=NOW)
    assert secret["metadata"] == {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}
    assert secret["type"] == SECRET_TYPE
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    expires = datetime.datetime.fromtimestamp(NOW + 3600, tz=datetime.UTC)
    assert decoded == {"token-id": "abcdef", "token-secret": "0123456789abcdef",
                       "description": "d",
                       "expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "usage-bootstrap-authentication": "true",
                       "auth-extra-groups": "system:bootstrappers:x"}
    forever = token_secret(TOKEN, ttl=0, usages=[], groups=[], now=NOW)
    assert "expiration" not in forever["data"]
    with pytest.raises(TokenError):
        token_secret(TOKEN, ttl=0, usages=[], groups=["admins"], now=NOW)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_jn3_jws_is_rfc7515_hs256_with_the_payload_detached() -> None:
    content = "apiVersion: v1\nkind: Config\n"
    sig = sign_detached(content, TOKEN)
    header_b64, payload, mac_b64 = sig.split(".")
    assert payload == ""
    assert json.loads(base64.urlsafe_b64decode(header_b64 + "==")) == {"alg": "HS256",
                                                                       "kid": "abcdef"}
    # computed independently: HMAC-SHA256 over header.payload, keyed by the token secret
    expected = hmac.new(b"0123456789abcdef",
                        f"{header_b64}.{_b64url(content.encode())}".encode(),
                        hashlib.sha256).digest()
    assert mac_b64 == _b64url(expected)
    assert verify_detached(sig, content, TOKEN)


def test_jn3_jws_fails_with_another_token_or_content() -> None:
    content = "kubeconfig"
    sig = sign_detached(content, TOKEN)
    assert not verify_detached(sig, content, Token("abcdef", "ffffffffffffffff"))
    assert not verify_detached(sig, content, Token("zzzzzz", "0123456789abcdef"))  # kid
    assert not verify_detached(sig, content + " ", TOKEN)
    header, _, mac = sig.partition("..")
    assert not verify_detached(f"{header}.{_b64url(content.encode())}.{mac}", content, TOKEN)
    none_alg = _b64url(json.dumps({"alg": "none", "kid": "abcdef"}).encode())
    assert not verify_detached(f"{none_alg}..{mac}", content, TOKEN)
    assert not verify_detached("garbage", content, TOKEN)


def _ca(tmp_path: Path) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp_path / "ca.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def test_jn3_ca_hash_matches_openssl(tmp_path: Path) -> None:
    ca = _ca(tmp_path)
    pipeline = (f"openssl x509 -pubkey -noout -in {ca} | openssl pkey -pubin -outform der "
                "| sha256sum")
    digest = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], check=True,
                            capture_output=True, text=True).stdout.split()[0]
    assert ca_cert_hash(ca.read_bytes()) == f"sha256:{digest}"
    assert ca_matches(ca.read_bytes(), [f"sha256:{digest.upper()}"])
    assert not ca_matches(ca.read_bytes(), ["sha256:" + "0" * 64])
    with pytest.raises(TokenError, match="invalid hash"):
        ca_matches(ca.read_bytes(), [digest])


def test_jn3_signer_signs_each_signing_token_and_drops_others() -> None:
    data = {"kubeconfig": "k", "jws-kubeconfig-old000": "x..y", "other": "kept"}
    other = Token("zzzzzz", "ffffffffffffffff")
    updated = signed_data(data, [TOKEN, other])
    assert updated is not None
    assert updated == {"kubeconfig": "k", "other": "kept",
                       "jws-kubeconfig-abcdef": sign_detached("k", TOKEN),
                       "jws-kubeconfig-zzzzzz": sign_detached("k", other)}
    assert signed_data(updated, [TOKEN, other]) is None  # nothing to change
    assert signed_data({"other": "x"}, [TOKEN]) is None  # no kubeconfig: left alone
    stale = {**updated, "kubeconfig": "changed"}
    resigned = signed_data(stale, [TOKEN])
    assert resigned == {"kubeconfig": "changed", "other": "kept",
                        "jws-kubeconfig-abcdef": sign_detached("changed", TOKEN)}


def test_jn3_cluster_info_names_only_the_cluster_and_anonymous_may_get_it() -> None:
    cm, role, binding = cluster_info_objects(server="https://127.0.0.1:6443", ca_pem=b"PEM")
    import yaml

    config = yaml.safe_load(cm["data"]["kubeconfig"])
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority-data": base64.b64encode(b"PEM").decode()}
    assert not config.get("users")
    assert (cm["metadata"], role["rules"]) == (
        {"name": "cluster-info", "namespace": "kube-public"},
        [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"],
          "verbs": ["get"]}])
    assert binding["subjects"][0]["name"] == "system:anonymous"


def test_jn3_token_list_rows() -> None:
    later = datetime.datetime.fromtimestamp(NOW + 7200 + 30, tz=datetime.UTC)
    rows = token_rows([_valid(expiration=later.strftime("%Y-%m-%dT%H:%M:%SZ")),
                       _secret({"token-id": "bad"}),
                       {"type": "Opaque", "metadata": {"name": "x"}}], now=NOW)
    assert rows[1:] == [["abcdef.0123456789abcdef", "2h",
                         later.strftime("%Y-%m-%dT%H:%M:%SZ"), "authentication,signing",
                         "<none>", "<none>"]]
