"""API errors in Kubernetes' terms (a `Status` with a reason and field causes).

One exception type travels from the apiserver's registry through the wire (see
`skiff.rpc.errors`) to the client, so a caller can branch on `reason` exactly as it would on
Kubernetes' `metav1.StatusReason`, and a user reads a message that names the field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Reason(enum.StrEnum):
    """Kubernetes' StatusReason values that Skiff uses, with their HTTP codes."""

    BAD_REQUEST = "BadRequest"
    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    INVALID = "Invalid"
    FORBIDDEN = "Forbidden"
    GONE = "Expired"
    TOO_MANY_REQUESTS = "TooManyRequests"
    REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
    TIMEOUT = "Timeout"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    INTERNAL_ERROR = "InternalError"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"


HTTP_CODES: dict[Reason, int] = {
    Reason.BAD_REQUEST: 400,
    Reason.NOT_FOUND: 404,
    Reason.ALREADY_EXISTS: 409,
    Reason.CONFLICT: 409,
    Reason.INVALID: 422,
    Reason.FORBIDDEN: 403,
    Reason.GONE: 410,
    Reason.TOO_MANY_REQUESTS: 429,
    Reason.REQUEST_ENTITY_TOO_LARGE: 413,
    Reason.TIMEOUT: 504,
    Reason.SERVICE_UNAVAILABLE: 503,
    Reason.INTERNAL_ERROR: 500,
    Reason.METHOD_NOT_ALLOWED: 405,
}


@dataclass(frozen=True)
class FieldError:
    """One invalid field: `spec.containers[0].name: Required value`."""

    path: str
    type: str  # Kubernetes' ErrorType text: "Required value", "Invalid value", ...
    detail: str = ""
    value: Any = None

    def __str__(self) -> str:
        text = f"{self.path}: {self.type}"
        if self.type in ("Invalid value", "Unsupported value", "Forbidden", "Too long") and (
            self.value is not None
        ):
            text += f": {self.value!r}"
        if self.detail:
            text += f": {self.detail}"
        return text


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "Invalid value", detail, value)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    allowed = ", ".join(f'"{s}"' for s in supported)
    return FieldError(path, "Unsupported value", f"supported values: {allowed}", value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, "Duplicate value", "", value)


def too_long(path: str, value: Any, limit: int) -> FieldError:
    return FieldError(path, "Too long", f"must have at most {limit} bytes", None)


@dataclass
class ApiError(Exception):
    """An API failure with Kubernetes' reason, a message for people and field causes."""

    reason: Reason
    message: str
    causes: list[FieldError] = field(default_factory=list)
    retry_after_seconds: int | None = None

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
            "code": self.code,
        }
        details: dict[str, Any] = {}
        if self.causes:
            details["causes"] = [
                {"reason": "Field" + c.type.split()[0].capitalize(), "message": str(c),
                 "field": c.path}
                for c in self.causes
            ]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if details:
            status["details"] = details
        return status

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> ApiError:
        try:
            reason = Reason(status.get("reason", "InternalError"))
        except ValueError:
            reason = Reason.INTERNAL_ERROR
        details = status.get("details") or {}
        causes = [
            FieldError(c.get("field", ""), "", c.get("message", ""))
            for c in details.get("causes", [])
        ]
        return cls(reason, str(status.get("message", "")), causes,
                   details.get("retryAfterSeconds"))

    # Constructors named like apimachinery's errors.NewXxx.
    @classmethod
    def not_found(cls, resource: str, name: str) -> ApiError:
        return cls(Reason.NOT_FOUND, f'{resource} "{name}" not found')

    @classmethod
    def already_exists(cls, resource: str, name: str) -> ApiError:
        return cls(Reason.ALREADY_EXISTS, f'{resource} "{name}" already exists')

    @classmethod
    def conflict(cls, resource: str, name: str, why: str) -> ApiError:
        return cls(
            Reason.CONFLICT,
            f'Operation cannot be fulfilled on {resource} "{name}": {why}',
        )

    @classmethod
    def invalid(cls, kind: str, name: str, causes: list[FieldError]) -> ApiError:
        joined = ", ".join(str(c) for c in causes)
        return cls(Reason.INVALID, f'{kind} "{name}" is invalid: {joined}', list(causes))

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(Reason.BAD_REQUEST, message)

    @classmethod
    def forbidden(cls, resource: str, name: str, why: str) -> ApiError:
        return cls(Reason.FORBIDDEN, f'{resource} "{name}" is forbidden: {why}')

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(Reason.GONE, message)
