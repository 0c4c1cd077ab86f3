"""The TokenRequest API (`POST .../serviceaccounts/<name>/token`, authentication.k8s.io/v1
TokenRequest), as kube-apiserver serves it (SPEC AX3, AU9).

In Kubernetes' order: the ServiceAccount must exist; `expirationSeconds` (default one
hour) must lie between ten minutes and 2^32 seconds; a kubelet passes NodeRestriction (its
token must be bound, by uid, to a pod scheduled on its node: with it, a stolen node identity
cannot mint a token for any other workload); the bound object (a Pod running as this
ServiceAccount, a Secret or a Node) must exist with the uid given; the lifetime is capped
by `--service-account-max-token-expiration`, and a pod-bound request for exactly 3607
seconds for the apiserver's audiences (the kubelet's `kube-api-access` volume) is extended
to a year with `warnafter` set when `--service-account-extend-token-expiration` is on. The
answer carries the signed token and the expiry the client should refresh by.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from skiff.api.errors import ApiError, invalid
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.auth.satoken import (
    DEFAULT_EXPIRATION_SECONDS,
    MAX_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
    WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
    TokenAuthority,
)
from skiff.apiserver.registry.store import Registry
from skiff.auth import node_identity

KIND = "TokenRequest"
GROUP = "authentication.k8s.io"


def _decode_error(field: str, value: Any, go_type: str) -> ApiError:
    """kube-apiserver's answer to a body field of the wrong JSON type (400)."""
    json_type = ("array" if isinstance(value, list) else "object" if isinstance(value, dict)
                 else "string" if isinstance(value, str) else "bool"
                 if isinstance(value, bool) else "number")
    return ApiError.bad_request(
        f'{KIND} in version "v1" cannot be handled as a {KIND}: json: cannot unmarshal '
        f"{json_type} into Go struct field {field} of type {go_type}")


def _request_fields(request: Any) -> tuple[Obj, Obj]:
    """(metadata, spec) of the body, each a map, or 400; so are `spec.boundObjectRef` (a
    map) and `spec.audiences` (a list), the fields read first, checked before anything
    else is (the body's one set of type checks, for both fronts)."""
    if not isinstance(request, dict):
        raise _decode_error("TokenRequest", request, "v1.TokenRequest")
    meta = request.get("metadata") or {}
    if not isinstance(meta, dict):
        raise _decode_error("TokenRequest.metadata", meta, "v1.ObjectMeta")
    spec = request.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise _decode_error("TokenRequest.spec", spec, "v1.TokenRequestSpec")
    spec = spec or {}
    ref = spec.get("boundObjectRef")
    if ref is not None and not isinstance(ref, dict):
        raise _decode_error("TokenRequestSpec.spec.boundObjectRef", ref,
                            "v1.BoundObjectReference")
    audiences = spec.get("audiences")
    if audiences is not None and not isinstance(audiences, list):
        raise _decode_error("TokenRequestSpec.spec.audiences", audiences, "[]string")
    return meta, spec


def _spec_fields(spec: Obj) -> tuple[int, list[str], Obj | None]:
    """(expirationSeconds, audiences, boundObjectRef) with their JSON types checked."""
    expiration = spec.get("expirationSeconds")
    if expiration is None:
        expiration = DEFAULT_EXPIRATION_SECONDS
    if not isinstance(expiration, int) or isinstance(expiration, bool):
        raise _decode_error("TokenRequestSpec.spec.expirationSeconds", expiration, "int64")
    audiences = spec.get("audiences") or []
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise _decode_error("TokenRequestSpec.spec.audiences", audiences, "[]string")
    ref = spec.get("boundObjectRef")
    if ref is not None and not isinstance(ref, dict):
        raise _decode_error("TokenRequestSpec.spec.boundObjectRef", ref,
                            "v1.BoundObjectReference")
    for key in ("kind", "apiVersion", "name", "uid"):
        if ref is not None and not isinstance(ref.get(key, ""), str):
            raise _decode_error(f"BoundObjectReference.spec.boundObjectRef.{key}", ref[key],
                                "string")
    return expiration, list(audiences), ref or None


def _group_version_kind(ref: Obj) -> tuple[str, str, str]:
    api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
    group, _, version = api_version.rpartition("/")
    return group, version, kind


def _admit_node(node: str, namespace: str, name: str, ref: Obj | None,
                pod: Obj | None) -> None:
    """Kubernetes' NodeRestriction for TokenRequests: a kubelet gets only tokens bound to a
    pod (by name and uid) that is scheduled on its own node."""
    def refuse(why: str) -> ApiError:
        return ApiError.forbidden("serviceaccounts", name, why)

    if ref is None or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" \
            or not ref.get("name"):
        raise refuse("node requested token not bound to a pod")
    if not ref.get("uid"):
        raise refuse("node requested token with a pod binding without a uid")
    if pod is None:
        raise ApiError.not_found("pods", str(ref["name"]))
    if pod["metadata"].get("uid") != ref["uid"]:
        raise refuse(f"the UID in the bound object reference ({ref['uid']}) does not match "
                     f"the UID in record. The object might have been deleted and then "
                     f"recreated")
    if (pod.get("spec") or {}).get("nodeName") != node:
        raise refuse("node requested token bound to a pod scheduled on a different node")


async def create_token(registry: Registry, tokens: TokenAuthority, namespace: str,
                       name: str, request: Any) -> Obj:
    meta, spec = _request_fields(request)
    if meta.get("name") and meta["name"] != name:
        raise ApiError.invalid(KIND, name, [invalid(
            "metadata.name", meta["name"], "must match the service account name if "
            "specified")], group=GROUP)
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise ApiError.invalid(KIND, name, [invalid(
            "metadata.namespace", meta["namespace"], "must match the service account "
            "namespace if specified")], group=GROUP)
    sa = await registry.get("serviceaccounts", namespace, name)
    expiration, audiences, ref = _spec_fields(spec)
    problems = []
    if expiration < MIN_EXPIRATION_SECONDS:
        problems.append(invalid("spec.expirationSeconds", expiration,
                                "may not specify a duration less than 10 minutes"))
    if expiration > MAX_EXPIRATION_SECONDS:
        problems.append(invalid("spec.expirationSeconds", expiration,
                                "may not specify a duration larger than 2^32 seconds"))
    if problems:
        raise ApiError.invalid(KIND, "", problems, group=GROUP)
    audiences = audiences or list(tokens.audiences)

    user = current_user.get()
    node = node_identity(user) if user is not None else None
    if node is not None:  # NodeRestriction admission
        pod_name = str((ref or {}).get("name") or "")
        _admit_node(node, namespace, name, ref, await registry.get_or_none(
            "pods", namespace, pod_name) if pod_name else None)

    bound_pod: Obj | None = None
    bound_secret: Obj | None = None
    bound_node: Obj | None = None
    pod_node: Obj | None = None
    if ref is not None:
        group, version, kind = _group_version_kind(ref)
        ref_name = str(ref.get("name") or "")
        if group == "" and kind == "Pod":
            bound_pod = await registry.get("pods", namespace, ref_name)
            pod_spec = bound_pod.get("spec") or {}
            if name != (pod_spec.get("serviceAccountName") or "default"):
                raise ApiError.bad_request(
                    f'cannot bind token for serviceaccount "{name}" to pod running with '
                    f"different serviceaccount name.")
            uid = bound_pod["metadata"].get("uid")
            if pod_spec.get("nodeName"):  # named in the token, for information
                pod_node = await registry.get_or_none("nodes", None, pod_spec["nodeName"]) \
                    or {"metadata": {"name": pod_spec["nodeName"]}}
        elif group == "" and kind == "Node":
            bound_node = await registry.get("nodes", None, ref_name)
            uid = bound_node["metadata"].get("uid")
        elif group == "" and kind == "Secret":
            bound_secret = await registry.get("secrets", namespace, ref_name)
            uid = bound_secret["metadata"].get("uid")
        else:
            raise ApiError.bad_request(f"cannot bind token to object of type {group}/"
                                       f"{version}, Kind={kind}")
        if ref.get("uid") and uid != ref["uid"]:
            raise ApiError.conflict(kind, ref_name, (
                f"the UID in the bound object reference ({ref['uid']}) does not match the "
                f"UID in record. The object might have been deleted and then recreated"))

    if tokens.max_expiration_seconds and expiration > tokens.max_expiration_seconds:
        expiration = tokens.max_expiration_seconds  # Kubernetes warns; the answer says it
    lifetime, warn_after = expiration, 0
    if (tokens.extend_expiration and bound_pod is not None
            and expiration == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS
            and set(audiences) <= set(tokens.audiences)):
        lifetime, warn_after = tokens.max_extended_expiration_seconds, expiration
    issued = datetime.now(UTC)
    token, _ = tokens.issue(namespace=namespace, service_account=sa, audiences=audiences,
                            expiration_seconds=lifetime, bound_pod=bound_pod,
                            bound_secret=bound_secret, bound_node=bound_node,
                            pod_node=pod_node, warn_after_seconds=warn_after,
                            now=issued.timestamp())
    # The expiry the client is told (and refreshes by) is the one it asked for, also when
    # the token itself was extended.
    expires = int(issued.timestamp()) + expiration
    return {"kind": KIND, "apiVersion": f"{GROUP}/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": issued.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"audiences": audiences, "expirationSeconds": expiration,
                     "boundObjectRef": ref},
            "status": {"token": token,
                       "expirationTimestamp": datetime.fromtimestamp(expires, UTC)
                       .strftime("%Y-%m-%dT%H:%M:%SZ")}}
