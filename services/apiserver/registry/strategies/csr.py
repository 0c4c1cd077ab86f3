"""CertificateSigningRequests' strategy (`pkg/registry/certificates/certificates/strategy.go`,
SPEC JN2): the requester's identity (`spec.username/uid/groups/extra`) is the apiserver's
to write, from the authenticated user, never the client's; the spec never changes after
create; the status changes only through `status` (the certificate, Failed conditions) and
`approval` (Approved/Denied), each keeping what the other owns. Approving or denying also
needs `approve` on the `signers` resource for the CSR's signerName, as Kubernetes'
CertificateApproval admission asks.
"""

from __future__ import annotations

import copy
import time
from typing import ClassVar

from skiff.api import ApiError
from skiff.api.groups.certificates import APPROVED, DENIED, GROUP
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.registry.strategies.rbac import RbacPolicy
from skiff.apiserver.registry.strategy import OBJECT_SUBRESOURCES, Strategy
from skiff.auth import Attributes, Authorizer
from skiff.clock import rfc3339

APPROVAL = "approval"
_APPROVAL_TYPES = (APPROVED, DENIED)


class CsrPolicy:
    """The authorizer the approval check asks: the one the apiserver gives the RBAC
    escalation check (None in the insecure mode: nothing is checked)."""

    def __init__(self, rbac: RbacPolicy) -> None:
        self.rbac = rbac

    @property
    def authorizer(self) -> Authorizer | None:
        escalation = self.rbac.escalation
        return escalation.authorizer if escalation is not None else None


def _conditions(obj: Obj) -> list[Obj]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _approval_changed(old: Obj, new: Obj) -> bool:
    def pick(obj: Obj) -> list[Obj]:
        return [c for c in _conditions(obj) if c.get("type") in _APPROVAL_TYPES]
    return pick(old) != pick(new)


def fill_condition_times(new: Obj, old: Obj, *, now: str) -> None:
    """`populateConditionTimestamps`: an unset lastUpdateTime is now; an unset
    lastTransitionTime is the stored condition's when its status did not change, else now."""
    before = {c.get("type"): c for c in _conditions(old)}
    for cond in _conditions(new):
        if not isinstance(cond, dict):
            continue
        if not cond.get("lastUpdateTime"):
            cond["lastUpdateTime"] = now
        if not cond.get("lastTransitionTime"):
            prior = before.get(cond.get("type"))
            kept = prior is not None and prior.get("status") == cond.get("status")
            cond["lastTransitionTime"] = (prior or {}).get("lastTransitionTime") or now \
                if kept else now


class CsrStrategy(Strategy):
    """CertificateSigningRequests."""

    object_subresources: ClassVar[frozenset[str]] = OBJECT_SUBRESOURCES | {APPROVAL}

    def __init__(self, kind: str, policy: CsrPolicy) -> None:
        super().__init__(kind)
        self.policy = policy

    def prepare_for_create(self, obj: Obj) -> None:
        """The requester is who sent the request; a CSR is never created approved."""
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            for key in ("username", "uid", "groups", "extra"):
                spec.pop(key, None)
            user = current_user.get()
            if user is not None:
                spec["username"] = user.name
                if user.uid:
                    spec["uid"] = user.uid
                if user.groups:
                    spec["groups"] = list(user.groups)
                if user.extra:
                    spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        obj["status"] = {}

    def merge_subresource(self, old: Obj, new: Obj, subresource: str) -> Obj:
        """An `approval` write changes only the conditions."""
        if subresource != APPROVAL:
            return super().merge_subresource(old, new, subresource)
        merged = copy.deepcopy(old)
        status = merged.setdefault("status", {})
        status["conditions"] = copy.deepcopy(_conditions(new))
        if not status["conditions"]:
            status.pop("conditions")
        return merged

    def prepare_for_update(self, old: Obj, new: Obj, *, subresource: str) -> None:
        """The spec is the stored one; an update of the object keeps the stored status; a
        `status` write keeps the stored Approved/Denied conditions (only `approval` adds
        or removes those); a condition's unset times are filled in."""
        new["spec"] = copy.deepcopy(old.get("spec") or {})
        if subresource in ("status", APPROVAL):
            fill_condition_times(new, old, now=rfc3339(time.time()))
        if subresource == "":
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        elif subresource == "status":
            kept = [c for c in _conditions(old) if c.get("type") in _APPROVAL_TYPES]
            others = [c for c in _conditions(new) if c.get("type") not in _APPROVAL_TYPES]
            status = new.setdefault("status", {})
            status["conditions"] = copy.deepcopy(kept) + others
            if not status["conditions"]:
                status.pop("conditions")

    async def before_write(self, info: KindInfo, obj: Obj, old: Obj | None, *,
                           request_name: str | None) -> None:
        """Approving or denying needs `approve` on `signers` for the signerName (or its
        domain's wildcard `<domain>/*`)."""
        authorizer, user = self.policy.authorizer, current_user.get()
        if authorizer is None or user is None or old is None:
            return
        if not _approval_changed(old, obj):
            return
        signer = str((obj.get("spec") or {}).get("signerName", ""))
        for name in (signer, signer.split("/")[0] + "/*"):
            result = await authorizer.authorize(Attributes(
                user=user, verb="approve", api_group=GROUP, resource="signers",
                namespace="", name=name))
            if result.allowed:
                return
        raise ApiError.forbidden(
            info.resource, str(obj["metadata"].get("name", "")),
            f'user not permitted to approve requests with signerName "{signer}"',
            group=info.group)
