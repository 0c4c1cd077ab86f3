"""The TokenRequest API (`POST .../serviceaccounts/<name>/token`, authentication.k8s.io/v1
TokenRequest), as kube-apiserver serves it: the ServiceAccount must exist; a bound object
(a Pod) must exist and have the same uid; `expirationSeconds` defaults to one hour and may
not be under ten minutes; the answer carries the signed token and its expiry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from skiff.api.errors import ApiError, Reason, invalid, not_supported
from skiff.apiserver.registry import Registry
from skiff.apiserver.satoken import (
    DEFAULT_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
    TokenAuthority,
)

Obj = dict[str, Any]


async def create_token(registry: Registry, tokens: TokenAuthority, namespace: str,
                       name: str, request: Obj) -> Obj:
    sa = await registry.get("serviceaccounts", namespace, name)
    spec = request.get("spec") or {}
    if not isinstance(spec, dict):
        raise ApiError.invalid("TokenRequest", name, [invalid("spec", spec,
                                                              "must be an object")])
    expiration = spec.get("expirationSeconds", DEFAULT_EXPIRATION_SECONDS)
    if (not isinstance(expiration, int) or isinstance(expiration, bool)
            or expiration < MIN_EXPIRATION_SECONDS):
        raise ApiError.invalid("TokenRequest", name, [invalid(
            "spec.expirationSeconds", expiration,
            "may not specify a duration less than 10 minutes")])
    audiences = spec.get("audiences") or []
    bound_pod: Obj | None = None
    ref = spec.get("boundObjectRef")
    if ref:
        kind = ref.get("kind")
        if kind != "Pod":
            raise ApiError.invalid("TokenRequest", name, [not_supported(
                "spec.boundObjectRef.kind", kind, ["Pod"])])
        bound_pod = await registry.get("pods", namespace, str(ref.get("name", "")))
        if ref.get("uid") and bound_pod["metadata"].get("uid") != ref["uid"]:
            raise ApiError(Reason.CONFLICT,
                           f"the UID in the bound object reference ({ref['uid']}) does not "
                           f"match the UID in record. The object might have been deleted "
                           f"and then recreated")
    token, expires = tokens.issue(namespace=namespace, service_account=sa,
                                  audiences=audiences, expiration_seconds=expiration,
                                  bound_pod=bound_pod)
    out_spec: Obj = {"audiences": list(audiences or tokens.audiences),
                     "expirationSeconds": expiration,
                     "boundObjectRef": ref or None}
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": None},
            "spec": out_spec,
            "status": {"token": token,
                       "expirationTimestamp": datetime.fromtimestamp(expires, UTC)
                       .strftime("%Y-%m-%dT%H:%M:%SZ")}}
