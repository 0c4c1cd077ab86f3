"""The csrcleaner (`pkg/controller/certificates/cleaner`, SPEC JN2).

Automatic requests (every kubelet's bootstrap and each rotation) and automatic approvals
make CertificateSigningRequests pile up, so kube-controller-manager deletes them: one
issued an hour after its approval, one Denied or Failed an hour after that condition, one
still Pending (no condition) a day after its creation, one Approved but never issued a day
after its creation, and one whose certificate has expired at once. `deletion_due` is that
rule as a pure function; the controller looks at each CSR again when it falls due.
"""

from __future__ import annotations

import logging

from cryptography import x509

from skiff.api import ApiError, Reason
from skiff.api.groups import certificates as csrs
from skiff.api.types import ObjView
from skiff.clock import parse_rfc3339
from skiff.controller_manager.certificates.controllers import RESOURCE, CsrController

__all__ = ["CsrCleanerController", "deletion_due"]

log = logging.getLogger(__name__)

APPROVED_EXPIRATION = 3600.0  # issued: an hour after the approval
DENIED_EXPIRATION = 3600.0  # Denied or Failed: an hour after that condition
PENDING_EXPIRATION = 24 * 3600.0  # no decision (or approved, never issued): a day


def _since(value: object) -> float | None:
    try:
        return parse_rfc3339(str(value)) if value else None
    except ValueError:
        return None


def _condition_time(csr: ObjView, type_: str) -> float | None:
    for cond in csrs.conditions(csr):
        if cond.get("type") == type_:
            return _since(cond.get("lastUpdateTime") or cond.get("lastTransitionTime"))
    return None


def _not_after(csr: ObjView) -> float | None:
    raw = (csr.get("status") or {}).get("certificate")
    if not raw:
        return None
    try:
        cert = x509.load_pem_x509_certificate(csrs.decode_bytes(raw))
    except ValueError:
        return None
    return cert.not_valid_after_utc.timestamp()


def deletion_due(csr: ObjView) -> float | None:
    """When `csr` is to be deleted (a Unix time, maybe already past); None: never."""
    created = _since((csr.get("metadata") or {}).get("creationTimestamp"))
    issued = bool((csr.get("status") or {}).get("certificate"))
    due: list[float] = []
    approved = _condition_time(csr, csrs.APPROVED)
    if approved is not None and issued:
        due.append(approved + APPROVED_EXPIRATION)
        if (expires := _not_after(csr)) is not None:
            due.append(expires)
    for decided in (_condition_time(csr, csrs.DENIED), _condition_time(csr, csrs.FAILED)):
        if decided is not None:
            due.append(decided + DENIED_EXPIRATION)
    if created is not None and not issued and (
            not csrs.conditions(csr) or csrs.has_condition(csr, csrs.APPROVED)):
        due.append(created + PENDING_EXPIRATION)
    return min(due) if due else None


class CsrCleanerController(CsrController):
    name = "csrcleaner"

    async def reconcile(self, key: str) -> float | None:
        csr = self.csrs.store.get(key)
        if csr is None or csr["metadata"].get("deletionTimestamp"):
            return None
        due = deletion_due(csr)
        if due is None:
            return None
        left = due - self.clock.now()
        if left > 0:
            return left + 0.5
        log.info("deleting an old CertificateSigningRequest", extra={"csr": key})
        try:
            await self.client.delete(RESOURCE, key, None,
                                     uid=str(csr["metadata"].get("uid") or "") or None)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
        return None
