"""ApiError ↔ gRPC status: the Kubernetes `Status` travels in a binary trailer.

The gRPC code lets generic tools (grpcurl, health checks, retries) do the right thing; the
trailer carries the full Status so the client re-raises the same `ApiError`, field causes
included.
"""

from __future__ import annotations

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.rpc import codec
from skiff.rpc.service import STATUS_TRAILER

GRPC_CODES: dict[Reason, grpc.StatusCode] = {
    Reason.BAD_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Reason.CONFLICT: grpc.StatusCode.ABORTED,
    Reason.UNAUTHORIZED: grpc.StatusCode.UNAUTHENTICATED,
    Reason.FORBIDDEN: grpc.StatusCode.PERMISSION_DENIED,
    Reason.GONE: grpc.StatusCode.OUT_OF_RANGE,
    Reason.TOO_MANY_REQUESTS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.REQUEST_ENTITY_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
    Reason.SERVICE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Reason.INTERNAL_ERROR: grpc.StatusCode.INTERNAL,
    Reason.METHOD_NOT_ALLOWED: grpc.StatusCode.UNIMPLEMENTED,
    Reason.UNSUPPORTED_MEDIA_TYPE: grpc.StatusCode.INVALID_ARGUMENT,
}

_REASON_BY_CODE: dict[grpc.StatusCode, Reason] = {
    grpc.StatusCode.INVALID_ARGUMENT: Reason.BAD_REQUEST,
    grpc.StatusCode.NOT_FOUND: Reason.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS: Reason.ALREADY_EXISTS,
    grpc.StatusCode.ABORTED: Reason.CONFLICT,
    grpc.StatusCode.UNAUTHENTICATED: Reason.UNAUTHORIZED,
    grpc.StatusCode.PERMISSION_DENIED: Reason.FORBIDDEN,
    grpc.StatusCode.OUT_OF_RANGE: Reason.GONE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Reason.TOO_MANY_REQUESTS,
    grpc.StatusCode.DEADLINE_EXCEEDED: Reason.TIMEOUT,
    grpc.StatusCode.UNAVAILABLE: Reason.SERVICE_UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED: Reason.METHOD_NOT_ALLOWED,
}


def to_grpc(err: ApiError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The (code, details, trailing metadata) with which a server aborts a call."""
    trailer = ((STATUS_TRAILER, codec.encode(err.to_status())),)
    return GRPC_CODES[err.reason], err.message, trailer


def from_grpc(err: grpc.aio.AioRpcError, *, target: str = "") -> ApiError:
    """Rebuild the server's ApiError; transport failures become ServiceUnavailable."""
    trailing = err.trailing_metadata() or ()
    for key, value in trailing:
        if key == STATUS_TRAILER and isinstance(value, bytes):
            try:
                return ApiError.from_status(codec.decode_map(value))
            except codec.CodecError:
                break
    code = err.code()
    reason = _REASON_BY_CODE.get(code, Reason.INTERNAL_ERROR)
    if code == grpc.StatusCode.UNAVAILABLE:
        where = f" at {target}" if target else ""
        return ApiError(reason, f"the apiserver{where} is unavailable ({err.details()}); "
                                "is the cluster running? try `skiff status`")
    return ApiError(reason, err.details() or code.name)
