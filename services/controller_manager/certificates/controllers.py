"""The csrsigning and csrapproving controllers (`pkg/controller/certificates/signer` and
`approver/sarapprove.go`, SPEC JN2).

csrsigning: an Approved CertificateSigningRequest of a kubernetes.io signer, not Denied,
Failed or issued yet, gets its certificate from the cluster CA (`--cluster-signing-*`);
one that breaks its signer's rules gets a Failed condition instead.

csrapproving: a `kube-apiserver-client-kubelet` CSR is Approved (reason AutoApproved)
when a SubjectAccessReview says its requester may `create`
`certificatesigningrequests/selfnodeclient` (the node renewing its own certificate) or
`certificatesigningrequests/nodeclient` (a bootstrap token's user); otherwise it stays
pending for a person. Skiff adds two rules of its own: a bootstrap token's CSR for the name
of a Node that already exists is left to a person (a token must not mint an existing node's
identity), and a `kubelet-serving` CSR is approved, as kubelet-csr-approver does, only
when the node itself asks and every name in it is one of its Node's addresses.
"""

from __future__ import annotations

import base64
import copy
import logging
from pathlib import Path
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.groups import certificates as csrs
from skiff.api.types import Obj
from skiff.clock import rfc3339
from skiff.controller_manager.certificates.signing import (
    NODES_GROUP,
    SIGNERS,
    Issuer,
    SignerRuleError,
    check_signer_rules,
    lifetime,
    node_name,
    serving_names_allowed,
    sign,
)
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)

RESOURCE = "certificatesigningrequests"
SERVING_NODE_WAIT = 2.0  # a serving CSR comes right after its Node registers


def with_condition(csr: Obj, *, type_: str, reason: str, message: str, now: str) -> Obj:
    """A copy of `csr` with one more True condition."""
    updated = copy.deepcopy(csr)
    status = updated.setdefault("status", {})
    status.setdefault("conditions", []).append({
        "type": type_, "status": "True", "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now})
    return updated


def load_issuer(context: ControllerContext) -> Issuer | None:
    """The cluster CA from --cluster-signing-cert/key-file; None when not set."""
    s = context.settings
    if not s.cluster_signing_cert_file or not s.cluster_signing_key_file:
        return None
    return Issuer.load(cert_pem=Path(s.cluster_signing_cert_file).read_bytes(),
                       key_pem=Path(s.cluster_signing_key_file).read_bytes())


class CsrController(Controller):
    """A controller keyed by CSR name over the shared CSR informer (`csrs`)."""

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=1)
        self.csrs = context.informers.resource(RESOURCE)
        self.csrs.add_handler(on_add=self._on_csr, on_update=lambda _o, n: self._on_csr(n))

    def _on_csr(self, csr: Obj) -> None:
        self.enqueue(str(csr["metadata"]["name"]))

    def now(self) -> str:
        return rfc3339(self.clock.now())


class CsrSigningController(CsrController):
    name = "csrsigning"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context)
        self.issuer = load_issuer(context)
        if self.issuer is None:
            log.info("no --cluster-signing-cert-file: CSRs are not signed")

    async def reconcile(self, key: str) -> float | None:
        csr = self.csrs.store.get(key)
        if csr is None or self.issuer is None:
            return None
        spec = csr.get("spec") or {}
        signer = str(spec.get("signerName", ""))
        if (signer not in SIGNERS or not csrs.has_condition(csr, csrs.APPROVED)
                or csrs.has_condition(csr, csrs.DENIED)
                or csrs.has_condition(csr, csrs.FAILED)
                or (csr.get("status") or {}).get("certificate")):
            return None
        usages = [str(u) for u in spec.get("usages") or []]
        try:
            request = csrs.parse_request(csrs.decode_bytes(spec.get("request")))
            check_signer_rules(signer=signer, csr=request, usages=usages)
        except (SignerRuleError, ValueError) as err:
            await self.client.update_status(with_condition(
                csr, type_=csrs.FAILED, reason="SignerValidationFailure",
                message=str(err), now=self.now()))
            return None
        seconds = spec.get("expirationSeconds")
        pem = sign(issuer=self.issuer, csr=request, usages=usages,
                   valid_for=lifetime(expiration_seconds=seconds if isinstance(seconds, int)
                                      else None,
                                      max_duration=self.context.settings
                                      .cluster_signing_duration))
        updated = copy.deepcopy(csr)
        updated.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
        await self.client.update_status(updated)
        return None


# (subresource, whether the requester must be the node itself, message)
_RECOGNIZERS = (
    ("selfnodeclient", True,
     "Auto approving self kubelet client certificate after SubjectAccessReview."),
    ("nodeclient", False,
     "Auto approving kubelet client certificate after SubjectAccessReview."),
)


def access_review(spec: Obj, subresource: str) -> Obj:
    """The SubjectAccessReview asking whether the CSR's requester may `create`
    `certificatesigningrequests/<subresource>`."""
    review_spec: Obj = {
        "user": spec.get("username", ""), "groups": list(spec.get("groups") or []),
        "resourceAttributes": {"group": csrs.GROUP, "resource": RESOURCE,
                               "verb": "create", "subresource": subresource}}
    if spec.get("uid"):
        review_spec["uid"] = spec["uid"]
    if spec.get("extra"):
        review_spec["extra"] = spec["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": review_spec}


class CsrApprovingController(CsrController):
    name = "csrapproving"

    async def reconcile(self, key: str) -> float | None:
        csr = self.csrs.store.get(key)
        if csr is None:
            return None
        spec = csr.get("spec") or {}
        if csrs.has_condition(csr, csrs.APPROVED) or csrs.has_condition(csr, csrs.DENIED):
            return None
        if spec.get("signerName") == csrs.KUBELET_SERVING:
            return await self._serving(csr, spec)
        if spec.get("signerName") != csrs.KUBE_APISERVER_CLIENT_KUBELET:
            return None
        try:
            request = csrs.parse_request(csrs.decode_bytes(spec.get("request")))
            check_signer_rules(signer=csrs.KUBE_APISERVER_CLIENT_KUBELET, csr=request,
                               usages=[str(u) for u in spec.get("usages") or []])
        except (SignerRuleError, ValueError):
            return None  # not a node client CSR: a person decides
        is_self = spec.get("username") == f"system:node:{node_name(request)}"
        review: Any = getattr(self.client, "subject_access_review", None)
        approve: Any = getattr(self.client, "update_approval", None)
        if review is None or approve is None:
            log.warning("this client cannot ask access reviews; CSRs are not auto-approved")
            return None
        for subresource, needs_self, message in _RECOGNIZERS:
            if needs_self and not is_self:
                continue
            if not is_self and await self._node(node_name(request)) is not None:
                # a bootstrap token asking for an existing Node's identity: a person
                # decides (`skiff join` refuses the name; this is the server's guard)
                log.info("not auto-approving a bootstrap CSR for an existing Node",
                         extra={"csr": key, "node": node_name(request)})
                return None
            answer = await review(access_review(spec, subresource))
            if (answer.get("status") or {}).get("allowed"):
                await approve(with_condition(csr, type_=csrs.APPROVED, reason="AutoApproved",
                                             message=message, now=self.now()))
                return None
        return None

    async def _node(self, name: str) -> Obj | None:
        try:
            return await self.client.get("nodes", name)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise

    async def _serving(self, csr: Obj, spec: Obj) -> float | None:
        """kubelet-csr-approver's rules (Kubernetes approves no serving CSR by itself): the
        requester is the node the CSR names, in system:nodes, and every SAN is one of that
        Node's own addresses (or its name); else a person decides. A Node not registered
        yet (or without addresses yet) is waited for."""
        try:
            request = csrs.parse_request(csrs.decode_bytes(spec.get("request")))
            check_signer_rules(signer=csrs.KUBELET_SERVING, csr=request,
                               usages=[str(u) for u in spec.get("usages") or []])
        except (SignerRuleError, ValueError):
            return None
        name = node_name(request)
        if spec.get("username") != f"system:node:{name}" \
                or NODES_GROUP not in (spec.get("groups") or []):
            return None
        node = await self._node(name)
        if node is None or not (node.get("status") or {}).get("addresses"):
            return SERVING_NODE_WAIT  # registered, but its status not written yet
        if not serving_names_allowed(request, node):
            log.info("not auto-approving a serving CSR naming addresses the Node does not "
                     "have", extra={"csr": csr["metadata"]["name"], "node": name})
            return None
        approve: Any = getattr(self.client, "update_approval", None)
        if approve is None:
            return None
        await approve(with_condition(
            csr, type_=csrs.APPROVED, reason="AutoApproved", now=self.now(),
            message="Auto approving kubelet serving certificate: its names are the Node's "
                    "own addresses."))
        return None
