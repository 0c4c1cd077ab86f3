"""The AdmissionReview wire format (`admission.k8s.io/v1`, Kubernetes' `webhook/request`)
and the errors a webhook call ends in (`webhook/errors`, `util/webhook/error.go`), kept
apart from the dispatch logic: the request sent, the checks every response must pass, and
the messages a client reads — `admission webhook "<name>" denied the request: <message>`,
`failed calling webhook "<name>": ...`, `admission webhook "<name>" does not support dry
run`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.errors import ApiError, Reason
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.matching import Invocation, Request
from skiff.auth import UserInfo

REVIEW_API_VERSION = "admission.k8s.io/v1"


class CallingWebhookError(Exception):
    """`ErrCallingWebhook`: the webhook could not be asked or answered nonsense (what
    failurePolicy decides about); the message is Kubernetes'."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')
        self.webhook = webhook
        self.reason = reason


def _gvk(info: KindInfo) -> Obj:
    return {"group": info.group, "version": info.version, "kind": info.kind}


def _gvr(info: KindInfo) -> Obj:
    return {"group": info.group, "version": info.version, "resource": info.resource}


def _options(req: Request) -> Obj | None:
    kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
            "DELETE": "DeleteOptions"}.get(req.operation)
    if kind is None:
        return None
    options: Obj = {"apiVersion": "meta.k8s.io/v1", "kind": kind}
    if req.dry_run:
        options["dryRun"] = ["All"]
    return options


def admission_review(req: Request, invocation: Invocation, *, user: UserInfo | None,
                     obj: Obj | None, old: Obj | None) -> tuple[str, Obj]:
    """A fresh uid and the AdmissionReview for one call (`CreateV1AdmissionReview`); `obj`
    and `old` are already in the version the webhook is sent."""
    uid = str(uuid.uuid4())
    user_info: Obj = {"username": user.name if user else "",
                      "groups": list(user.groups) if user else []}
    if user and user.uid:
        user_info["uid"] = user.uid
    if user and user.extra:
        user_info["extra"] = {k: list(v) for k, v in user.extra.items()}
    request: Obj = {
        "uid": uid,
        "kind": _gvk(invocation.info),
        "resource": _gvr(invocation.info),
        "requestKind": _gvk(req.info),
        "requestResource": _gvr(req.info),
        "operation": req.operation,
        "userInfo": user_info,
        "object": obj,
        "oldObject": old,
        "dryRun": req.dry_run,
        "options": _options(req),
    }
    if req.subresource:
        request["subResource"] = request["requestSubResource"] = req.subresource
    if req.name:
        request["name"] = req.name
    if req.namespace:
        request["namespace"] = req.namespace
    return uid, {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview",
                 "request": request}


@dataclass
class Response:
    """What a verified AdmissionReview response says."""

    allowed: bool
    result: Mapping[str, Any] | None = None
    patch: bytes = b""
    warnings: list[str] = field(default_factory=list)


def verify_response(uid: str, body: Any, *, mutating: bool) -> Response:
    """`VerifyAdmissionResponse`; ValueError with Kubernetes' message when it is invalid."""
    if not isinstance(body, Mapping):
        raise ValueError("unexpected response type")
    response = body.get("response")
    if not isinstance(response, Mapping):
        raise ValueError("webhook response was absent")
    if response.get("uid") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    api_version, kind = body.get("apiVersion") or "", body.get("kind") or ""
    if (api_version, kind) != (REVIEW_API_VERSION, "AdmissionReview"):
        group, _, version = str(api_version).rpartition("/")
        raise ValueError("expected webhook response of admission.k8s.io/v1, "
                         f"Kind=AdmissionReview, got {group}/{version}, Kind={kind}")
    patch, patch_type = response.get("patch"), response.get("patchType")
    if not mutating:
        if patch:
            raise ValueError("validating webhook may not return response.patch")
        if patch_type is not None:
            raise ValueError("validating webhook may not return response.patchType")
        patch = None
    elif patch and patch_type is None:
        raise ValueError("webhook returned response.patch but not response.patchType")
    elif not patch and patch_type is not None:
        raise ValueError("webhook returned response.patchType but not response.patch")
    elif patch_type is not None and not patch_type:
        raise ValueError('webhook returned invalid response.patchType of ""')
    raw = b""
    if patch:
        try:
            raw = base64.b64decode(str(patch), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("illegal base64 data in response.patch") from None
        if patch_type != "JSONPatch":
            raise ValueError(f'unsupported patch type "{patch_type}"')
    result = response.get("status")
    warnings = response.get("warnings") or []
    return Response(allowed=response.get("allowed") is True,
                    result=result if isinstance(result, Mapping) else None, patch=raw,
                    warnings=[str(w) for w in warnings if isinstance(w, str)])


def denied(webhook: str, result: Mapping[str, Any] | None) -> ApiError:
    """`webhookerrors.ToStatusErr`: a webhook's refusal as the client reads it, its message
    behind `admission webhook "<name>" denied the request`, its reason (or the one of its
    status code, at least 400) kept."""
    result = result or {}
    denied_by = f'admission webhook "{webhook}" denied the request'
    message, reason_text = result.get("message"), result.get("reason")
    if message:
        text = f"{denied_by}: {message}"
    elif reason_text:
        text = f"{denied_by}: {reason_text}"
    else:
        text = f"{denied_by} without explanation"
    code = result.get("code")
    try:
        reason = Reason(str(reason_text))
    except ValueError:
        reason = _REASON_BY_CODE.get(code if isinstance(code, int) else 400,
                                     Reason.BAD_REQUEST)
    return ApiError(reason, text)


_REASON_BY_CODE = {400: Reason.BAD_REQUEST, 401: Reason.UNAUTHORIZED, 403: Reason.FORBIDDEN,
                   404: Reason.NOT_FOUND, 409: Reason.CONFLICT, 422: Reason.INVALID,
                   429: Reason.TOO_MANY_REQUESTS, 500: Reason.INTERNAL_ERROR,
                   503: Reason.SERVICE_UNAVAILABLE, 504: Reason.TIMEOUT}


def dry_run_unsupported(webhook: str) -> ApiError:
    """`NewDryRunUnsupportedErr`."""
    return ApiError.bad_request(f'admission webhook "{webhook}" does not support dry run')
