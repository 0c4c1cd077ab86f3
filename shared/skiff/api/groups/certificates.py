"""The certificates.k8s.io/v1 group (SPEC JN2): CertificateSigningRequests, through which a
client (a joining kubelet, a user) asks a signer for a certificate — their validation with
the messages and field paths of Kubernetes' `pkg/apis/certificates/validation`, kubectl's
columns (NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION) and known fields.

The request PEM is parsed with `cryptography`; the helpers that read a CSR's bytes and
conditions are shared with the apiserver's strategy and the controller-manager's signer
and approver, so they live here.
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

from skiff.api.bytesfields import decode_bytes as decode_bytes  # the controllers read it here
from skiff.api.columns import age, age_column, meta
from skiff.api.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
)
from skiff.api.fieldchecks import as_dict, as_list, is_int
from skiff.api.fieldschema import CONDITIONS, OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.api.types import Obj, ObjView

GROUP = "certificates.k8s.io"
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
MIN_EXPIRATION_SECONDS = 600
# Kubernetes' KeyUsage values, sorted as `sets.List` prints them in errors.
USAGES = sorted([
    "signing", "digital signature", "content commitment", "key encipherment",
    "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
    "decipher only", "any", "server auth", "client auth", "code signing",
    "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
    "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"])
_MAX_SIGNER_NAME = 571  # <fqdn 253>/<namespace 63>.<name 253>
_MAX_FQDN = 253
_CONDITION_STATUSES = ["False", "True", "Unknown"]


def parse_request(pem: bytes) -> x509.CertificateSigningRequest:
    """`spec.request` as a signed CSR; ValueError with Kubernetes' message otherwise."""
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        csr = x509.load_pem_x509_csr(pem)
        signed = csr.is_signature_valid
    except (ValueError, UnsupportedAlgorithm, InvalidSignature) as err:
        raise ValueError(f"x509: malformed certificate request: {err}") from None
    if not signed:
        raise ValueError("x509: ECDSA verification failure")
    return csr


def conditions(obj: ObjView) -> list[ObjView]:
    """The CSR's status conditions (dicts only)."""
    status = obj.get("status") or {}
    found = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in found or [] if isinstance(c, dict)]


def has_condition(obj: ObjView, type_: str) -> bool:
    """Whether the CSR carries a True condition of `type_` (Approved, Denied, Failed)."""
    return any(c.get("type") == type_ and c.get("status", "True") == "True"
               for c in conditions(obj))


def condition_text(obj: ObjView) -> str:
    """kubectl's CONDITION column: Denied, Approved or Pending, then ,Failed and ,Issued."""
    text = (DENIED if has_condition(obj, DENIED) else
            APPROVED if has_condition(obj, APPROVED) else "Pending")
    if has_condition(obj, FAILED):
        text += ",Failed"
    if (obj.get("status") or {}).get("certificate"):
        text += ",Issued"
    return text


def _signer_name(value: Any) -> list[FieldError]:
    path = "spec.signerName"
    if not isinstance(value, str) or not value:
        return [required(path)]
    if len(value) > _MAX_SIGNER_NAME:
        return [too_long(path, value, _MAX_SIGNER_NAME)]
    parts = value.split("/")
    if len(parts) != 2:
        return [invalid(path, value, "must be a fully qualified domain and path of the "
                                     "form 'example.com/signer-name'")]
    domain, rest = parts
    if len(domain) > _MAX_FQDN:
        return [too_long(path, domain, _MAX_FQDN)]
    if len(domain.split(".")) < 2:
        return [invalid(path, domain,
                        "should be a domain with at least two segments separated by dots")]
    for label in (domain, rest):
        for problem in dns1123_subdomain_problems(label) or ([] if label else ["empty"]):
            return [invalid(path, label, f'validating label "{label}": {problem}')]
    return []


def _spec(spec: ObjView) -> list[FieldError]:
    errors: list[FieldError] = []
    try:
        parse_request(decode_bytes(spec.get("request")))
    except ValueError as err:
        errors.append(invalid("spec.request", spec.get("request") or "", str(err)))
    usages, errors_usages = as_list(spec.get("usages"), "spec.usages")
    errors += errors_usages
    if not usages and not errors_usages:
        errors.append(required("spec.usages"))
    seen: set[str] = set()
    for i, usage in enumerate(usages):
        if usage not in USAGES:
            errors.append(not_supported(f"spec.usages[{i}]", usage, USAGES))
        if isinstance(usage, str) and usage in seen:
            errors.append(duplicate(f"spec.usages[{i}]", usage))
        seen.add(str(usage))
    errors += _signer_name(spec.get("signerName"))
    seconds = spec.get("expirationSeconds")
    if seconds is not None and (not is_int(seconds) or seconds < MIN_EXPIRATION_SECONDS):
        errors.append(invalid("spec.expirationSeconds", seconds,
                              "may not specify a duration less than 600 seconds (10 minutes)"))
    return errors


def _status(obj: ObjView) -> list[FieldError]:
    status, errors = as_dict(obj.get("status"), "status")
    found, list_errors = as_list(status.get("conditions"), "status.conditions")
    errors += list_errors
    seen: set[str] = set()
    for i, cond in enumerate(found):
        path = f"status.conditions[{i}]"
        if not isinstance(cond, dict):
            errors.append(invalid(path, cond, "must be an object"))
            continue
        type_ = cond.get("type")
        if not type_:
            errors.append(required(f"{path}.type"))
        if cond.get("status") not in _CONDITION_STATUSES:
            errors.append(not_supported(f"{path}.status", cond.get("status"),
                                        _CONDITION_STATUSES) if cond.get("status")
                          else required(f"{path}.status"))
        if type_ in (APPROVED, DENIED, FAILED):
            if type_ in (APPROVED, DENIED) and cond.get("status") not in (None, "True"):
                errors.append(not_supported(f"{path}.status", cond.get("status"), ["True"]))
            other = {APPROVED: DENIED, DENIED: APPROVED}.get(str(type_))
            if type_ in seen:
                errors.append(duplicate(f"{path}.type", type_))
            elif other in seen:
                errors.append(invalid(f"{path}.type", type_,
                                      "Approved and Denied conditions are mutually exclusive"))
            seen.add(str(type_))
    cert = status.get("certificate")
    if cert:
        pem = decode_bytes(cert)
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            errors.append(invalid("status.certificate", "<certificate data>",
                                  "must contain at least one CERTIFICATE PEM block"))
        else:
            try:
                x509.load_pem_x509_certificates(pem)
            except ValueError as err:
                errors.append(invalid("status.certificate", "<certificate data>", str(err)))
    return errors


def _update(obj: ObjView, old: ObjView) -> list[FieldError]:
    """What no update may do: change the spec, remove an Approved, Denied or Failed
    condition, or change a certificate once issued."""
    errors: list[FieldError] = []
    if obj.get("spec") != old.get("spec"):
        errors.append(forbidden("spec", "field is immutable"))
    for type_ in (APPROVED, DENIED, FAILED):
        if has_condition(old, type_) and not has_condition(obj, type_):
            errors.append(forbidden("status.conditions",
                                    f'updates may not remove a condition of type "{type_}"'))
    old_cert = (old.get("status") or {}).get("certificate")
    if old_cert and (obj.get("status") or {}).get("certificate") != old_cert:
        errors.append(forbidden("status.certificate",
                                "updates may not modify existing certificate content"))
    return errors


def validate_csr(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """`ValidateCertificateSigningRequestCreate`/`Update` (the strict options)."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += _spec(spec)
    errors += _status(obj)
    if old is not None:
        errors += _update(obj, old)
    return errors


def requested_duration(obj: Obj) -> str:
    """REQUESTEDDURATION: spec.expirationSeconds as kubectl prints a duration."""
    seconds = (obj.get("spec") or {}).get("expirationSeconds")
    if not is_int(seconds):
        return "<none>"
    return age("1970-01-01T00:00:00Z", now=float(seconds))


RULES = GroupRules(
    validators={"CertificateSigningRequest": validate_csr},
    columns={
        "CertificateSigningRequest": [
            ("NAME", meta("name")), ("AGE", age_column),
            ("SIGNERNAME", lambda o: str((o.get("spec") or {}).get("signerName", ""))),
            ("REQUESTOR", lambda o: str((o.get("spec") or {}).get("username", ""))),
            ("REQUESTEDDURATION", requested_duration),
            ("CONDITION", condition_text)],
    },
    schemas={
        "CertificateSigningRequest": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("request", "signerName", "expirationSeconds", "usages", "username",
                        "uid", "groups", "extra"),
            status=fields("certificate", conditions=CONDITIONS),
        ),
    },
)
