"""API errors in Kubernetes' terms (a `Status` with a reason and field causes).

One exception type travels from the apiserver's registry through the wire (see
`skiff.rpc.errors`) to the client, so a caller can branch on `reason` exactly as it would on
Kubernetes' `metav1.StatusReason`, and a user reads a message that names the field.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


class Reason(enum.StrEnum):
    """Kubernetes' StatusReason values that Skiff uses, with their HTTP codes."""

    BAD_REQUEST = "BadRequest"
    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    INVALID = "Invalid"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    GONE = "Expired"
    TOO_MANY_REQUESTS = "TooManyRequests"
    REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
    TIMEOUT = "Timeout"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    INTERNAL_ERROR = "InternalError"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"


HTTP_CODES: dict[Reason, int] = {
    Reason.BAD_REQUEST: 400,
    Reason.NOT_FOUND: 404,
    Reason.ALREADY_EXISTS: 409,
    Reason.CONFLICT: 409,
    Reason.INVALID: 422,
    Reason.UNAUTHORIZED: 401,
    Reason.FORBIDDEN: 403,
    Reason.GONE: 410,
    Reason.TOO_MANY_REQUESTS: 429,
    Reason.REQUEST_ENTITY_TOO_LARGE: 413,
    Reason.TIMEOUT: 504,
    Reason.SERVICE_UNAVAILABLE: 503,
    Reason.INTERNAL_ERROR: 500,
    Reason.METHOD_NOT_ALLOWED: 405,
    Reason.UNSUPPORTED_MEDIA_TYPE: 415,
}

# apimachinery's field.ErrorType: the text a message shows -> the cause `reason`.
CAUSE_TYPES: dict[str, str] = {
    "Not found": "FieldValueNotFound",
    "Required value": "FieldValueRequired",
    "Duplicate value": "FieldValueDuplicate",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Too few": "FieldValueTooFew",
    "Too short": "FieldValueTooShort",
    "Internal error": "InternalError",
}
_TYPE_BY_CAUSE = {v: k for k, v in CAUSE_TYPES.items()}
_SHOWS_VALUE = ("Invalid value", "Unsupported value", "Not found", "Duplicate value",
                "Too many", "Too few")


def go_value(value: Any) -> str:
    """A bad value as Kubernetes prints it: strings quoted, numbers bare, the rest JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class FieldError:
    """One invalid field: `spec.containers[0].name: Required value`."""

    path: str
    type: str  # Kubernetes' ErrorType text: "Required value", "Invalid value", ...
    detail: str = ""
    value: Any = None
    reason: str = ""  # a cause reason with no ErrorType text (`FieldManagerConflict`)

    @property
    def cause_type(self) -> str:
        return self.reason or CAUSE_TYPES.get(self.type, "FieldValueInvalid")

    def body(self) -> str:
        """The message without the field path (apimachinery's `ErrorBody`)."""
        text = self.type
        if self.type in _SHOWS_VALUE and self.value is not None:
            text += f": {go_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}" if text else self.detail
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "Invalid value", detail, value)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    allowed = ", ".join(f'"{s}"' for s in supported)
    return FieldError(path, "Unsupported value", f"supported values: {allowed}", value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(path, "Not found", "", value)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, "Duplicate value", "", value)


def too_long(path: str, value: Any, limit: int) -> FieldError:
    unit = "byte" if limit == 1 else "bytes"
    return FieldError(path, "Too long", f"may not be more than {limit} {unit}", None)


@dataclass
class ApiError(Exception):
    """An API failure with Kubernetes' reason, a message for people and field causes."""

    reason: Reason
    message: str
    causes: list[FieldError] = field(default_factory=list)
    retry_after_seconds: int | None = None
    # Status.details: what the error is about (kind is a resource or a Kind, as in Kubernetes)
    name: str = ""
    group: str = ""
    kind: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def code(self) -> int:
        return HTTP_CODES[self.reason]

    def __str__(self) -> str:
        return self.message

    def to_status(self) -> dict[str, Any]:
        """The Kubernetes `Status` object for this error."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": str(self.reason),
        }
        details: dict[str, Any] = {}
        for key, value in (("name", self.name), ("group", self.group), ("kind", self.kind)):
            if value:
                details[key] = value
        if self.causes:
            details["causes"] = [
                {"reason": c.cause_type, "message": c.body(), "field": c.path}
                for c in self.causes
            ]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if details or self.reason == Reason.NOT_FOUND:
            # Kubernetes' NotFound always has details, if empty for an unknown path; kubectl
            # reads `details.name` to tell a missing subresource from a missing object
            # (`kubectl debug`: "ephemeral containers are disabled").
            status["details"] = details
        status["code"] = self.code  # after details: Go's field order (metav1.Status)
        return status

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> ApiError:
        try:
            reason = Reason(status.get("reason", "InternalError"))
        except ValueError:
            reason = Reason.INTERNAL_ERROR
        details = status.get("details") or {}
        causes = [
            _cause(c.get("field", ""), c.get("reason", ""), c.get("message", ""))
            for c in details.get("causes", [])
        ]
        return cls(reason, str(status.get("message", "")), causes,
                   details.get("retryAfterSeconds"), name=details.get("name", ""),
                   group=details.get("group", ""), kind=details.get("kind", ""))

    # Constructors named like apimachinery's errors.NewXxx; `group` qualifies the resource
    # or kind the way Kubernetes prints it (`priorityclasses.scheduling.k8s.io "x"`).
    @classmethod
    def not_found(cls, resource: str, name: str, *, group: str = "") -> ApiError:
        return cls(Reason.NOT_FOUND, f'{_qualified(resource, group)} "{name}" not found',
                   name=name, group=group, kind=resource)

    @classmethod
    def already_exists(cls, resource: str, name: str, *, group: str = "") -> ApiError:
        return cls(Reason.ALREADY_EXISTS,
                   f'{_qualified(resource, group)} "{name}" already exists',
                   name=name, group=group, kind=resource)

    @classmethod
    def conflict(cls, resource: str, name: str, why: str, *, group: str = "") -> ApiError:
        return cls(
            Reason.CONFLICT,
            f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
            name=name, group=group, kind=resource,
        )

    @classmethod
    def invalid(cls, kind: str, name: str, causes: list[FieldError], *,
                group: str = "") -> ApiError:
        texts = list(dict.fromkeys(str(c) for c in causes))
        joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        message = f'{_qualified(kind, group)} "{name}" is invalid'
        return cls(Reason.INVALID, f"{message}: {joined}" if texts else message,
                   list(causes), name=name, group=group, kind=kind)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(Reason.BAD_REQUEST, message)

    @classmethod
    def forbidden(cls, resource: str, name: str, why: str, *, group: str = "") -> ApiError:
        what = _qualified(resource, group) + (f' "{name}"' if name else "")
        return cls(Reason.FORBIDDEN, f"{what} is forbidden: {why}" if resource
                   else f"forbidden: {why}", name=name, group=group, kind=resource)

    @classmethod
    def unauthorized(cls, message: str = "") -> ApiError:
        return cls(Reason.UNAUTHORIZED, message or "Unauthorized")

    @classmethod
    def method_not_supported(cls, resource: str, action: str, *,
                             group: str = "") -> ApiError:
        return cls(Reason.METHOD_NOT_ALLOWED, f"{action} is not supported on resources of "
                   f'kind "{_qualified(resource, group)}"', group=group, kind=resource)

    @classmethod
    def too_many_requests(cls, message: str, retry_after_seconds: int) -> ApiError:
        return cls(Reason.TOO_MANY_REQUESTS, message,
                   retry_after_seconds=retry_after_seconds)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(Reason.GONE, message)


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _cause(path: str, reason: str, body: str) -> FieldError:
    """A cause read back from a Status: the body already holds type, value and detail."""
    kind = _TYPE_BY_CAUSE.get(reason, "")
    return FieldError(path, "", body, None) if not kind else FieldError(
        path, kind, body.removeprefix(kind).removeprefix(": "), None)
