"""SPEC JN2's pure parts: CertificateSigningRequest validation with Kubernetes' messages,
kubectl's CONDITION column, the apiserver's strategy (requester from the request's user,
spec kept, approval only through `approval`), and the csrsigning rules and lifetimes."""

from __future__ import annotations

import base64
import copy
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skiff.api import validate
from skiff.api.groups.certificates import condition_text, requested_duration
from skiff.api.kinds import lookup
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.registry.strategies.catalog import Strategies
from skiff.apiserver.registry.strategy import merge_update
from skiff.auth import UserInfo
from skiff.controller_manager.certificates.signing import (
    Issuer,
    SignerRuleError,
    check_signer_rules,
    lifetime,
    sign,
)

KEY = ec.generate_private_key(ec.SECP256R1())


def request(cn: str, *orgs: str, dns: tuple[str, ...] = ()) -> x509.CertificateSigningRequest:
    names = [x509.NameAttribute(NameOID.COMMON_NAME, cn),
             *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs)]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return builder.sign(KEY, hashes.SHA256())


def b64(csr: x509.CertificateSigningRequest) -> str:
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def csr_obj(**spec: Any) -> Obj:
    base: Obj = {"request": b64(request("alice")), "usages": ["client auth"],
                 "signerName": "kubernetes.io/kube-apiserver-client"}
    base.update(spec)
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "c"}, "spec": base}


def errors(obj: Obj, old: Obj | None = None) -> list[str]:
    return [str(e) for e in validate(obj, old=old)]


def test_jn2_valid_csr_has_no_errors() -> None:
    assert errors(csr_obj()) == []


@pytest.mark.parametrize(("spec", "message"), [
    ({"request": base64.b64encode(b"invalid data").decode()},
     "spec.request: Invalid value: \"aW52YWxpZCBkYXRh\": PEM block type must be "
     "CERTIFICATE REQUEST"),
    ({"usages": []}, "spec.usages: Required value"),
    ({"usages": ["unknown"]}, 'spec.usages[0]: Unsupported value: "unknown"'),
    ({"usages": ["client auth", "client auth"]},
     'spec.usages[1]: Duplicate value: "client auth"'),
    ({"signerName": ""}, "spec.signerName: Required value"),
    ({"signerName": "an-invalid-signer-name"},
     "spec.signerName: Invalid value: \"an-invalid-signer-name\": must be a fully qualified "
     "domain and path of the form 'example.com/signer-name'"),
    ({"signerName": "example/some-signer-name"},
     'spec.signerName: Invalid value: "example": should be a domain with at least two '
     "segments separated by dots"),
    ({"expirationSeconds": 599},
     "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 "
     "seconds (10 minutes)"),
])
def test_jn2_spec_validation_messages(spec: Obj, message: str) -> None:
    found = errors(csr_obj(**spec))
    assert any(e.startswith(message) for e in found), found


def test_jn2_approved_and_denied_are_mutually_exclusive() -> None:
    obj = csr_obj()
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"},
                                    {"type": "Denied", "status": "True"}]}
    assert errors(obj) == ['status.conditions[1].type: Invalid value: "Denied": Approved '
                           "and Denied conditions are mutually exclusive"]


def test_jn2_approval_cannot_be_removed() -> None:
    old = csr_obj()
    new = copy.deepcopy(old)
    old["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    assert errors(new, old) == [
        'status.conditions: Forbidden: updates may not remove a condition of type "Approved"']


def test_jn2_condition_column() -> None:
    obj = csr_obj()
    assert condition_text(obj) == "Pending"
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}],
                     "certificate": "eA=="}
    assert condition_text(obj) == "Approved,Issued"
    obj["status"] = {"conditions": [{"type": "Denied", "status": "True"},
                                    {"type": "Failed", "status": "True"}]}
    assert condition_text(obj) == "Denied,Failed"
    assert requested_duration(csr_obj(expirationSeconds=3600)) == "60m"
    assert requested_duration(csr_obj()) == "<none>"


def test_jn2_requester_comes_from_the_request_user_not_the_client() -> None:
    strategy = Strategies()["CertificateSigningRequest"]
    obj = csr_obj(username="root", groups=["system:masters"])
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    token = current_user.set(UserInfo("bob", "u1", ("devs", "system:authenticated")))
    try:
        strategy.prepare_for_create(obj)
    finally:
        current_user.reset(token)
    assert (obj["spec"]["username"], obj["spec"]["uid"], obj["spec"]["groups"]) == (
        "bob", "u1", ["devs", "system:authenticated"])
    assert obj["status"] == {}


def test_jn2_spec_is_kept_and_approval_only_through_its_subresource() -> None:
    strategies = Strategies()
    info = lookup("csr")
    strategy = strategies.of(info)
    old = csr_obj(username="bob")
    new = copy.deepcopy(old)
    new["spec"]["usages"] = ["server auth"]
    new["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    merged = merge_update(info, strategy, old, new, "status")
    strategy.prepare_for_update(old, merged, subresource="status")
    assert merged["spec"] == old["spec"]
    assert "conditions" not in merged["status"]  # /status may not approve
    approved = merge_update(info, strategy, old, new, "approval")
    strategy.prepare_for_update(old, approved, subresource="approval")
    assert approved["status"]["conditions"][0]["type"] == "Approved"
    assert approved["spec"] == old["spec"]
    assert strategy.serves("approval")


def test_jn2_kubelet_client_signer_rules() -> None:
    signer = "kubernetes.io/kube-apiserver-client-kubelet"
    good = request("system:node:n1", "system:nodes")
    check_signer_rules(signer=signer, csr=good, usages=["digital signature", "client auth"])
    with pytest.raises(SignerRuleError, match="organization is not system:nodes"):
        check_signer_rules(signer=signer, csr=request("system:node:n1"), usages=["client auth"])
    with pytest.raises(SignerRuleError, match="system:node:"):
        check_signer_rules(signer=signer, csr=request("n1", "system:nodes"),
                           usages=["client auth"])
    with pytest.raises(SignerRuleError, match="usages"):
        check_signer_rules(signer=signer, csr=good, usages=["server auth"])
    with pytest.raises(SignerRuleError, match="DNS or IP"):
        check_signer_rules(signer="kubernetes.io/kubelet-serving", csr=good,
                           usages=["server auth"])
    check_signer_rules(signer="kubernetes.io/kubelet-serving",
                       csr=request("system:node:n1", "system:nodes", dns=("n1",)),
                       usages=["server auth", "key encipherment"])
    with pytest.raises(SignerRuleError, match="client auth"):
        check_signer_rules(signer="kubernetes.io/kube-apiserver-client",
                           csr=request("alice"), usages=["server auth"])


def test_jn2_lifetime_honours_expiration_seconds_and_the_cap() -> None:
    year = 365 * 24 * 3600.0
    assert lifetime(expiration_seconds=None, max_duration=year).total_seconds() == year
    assert lifetime(expiration_seconds=3600, max_duration=year).total_seconds() == 3600
    assert lifetime(expiration_seconds=10, max_duration=year).total_seconds() == 600
    assert lifetime(expiration_seconds=10**9, max_duration=7200).total_seconds() == 7200


def test_jn2_signed_certificate_verifies_against_the_ca() -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    issuer = Issuer(ca, ca_key)
    pem = sign(issuer=issuer, csr=request("alice", "devs"), usages=["client auth"],
               valid_for=datetime.timedelta(hours=1), now=now)
    cert = x509.load_pem_x509_certificate(pem)
    cert.verify_directly_issued_by(ca)
    assert cert.subject.rfc4514_string() == "O=devs,CN=alice"
    assert cert.not_valid_after_utc - now <= datetime.timedelta(hours=1, seconds=1)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_jn2_unset_condition_times_are_filled_in() -> None:
    strategies = Strategies()
    info = lookup("csr")
    strategy = strategies.of(info)
    old = csr_obj()
    new = copy.deepcopy(old)
    new["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    merged = merge_update(info, strategy, old, new, "approval")
    strategy.prepare_for_update(old, merged, subresource="approval")
    cond = merged["status"]["conditions"][0]
    assert cond["lastUpdateTime"] and cond["lastTransitionTime"] == cond["lastUpdateTime"]
    assert validate(merged, old=old) == []
