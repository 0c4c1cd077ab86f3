"""The object a write carries, checked before anything else reads it: it names the kind,
namespace and object the request addresses (SPEC AU5), its []byte fields decode and its
unknown fields are pruned (`fieldValidation`), it fits etcd's request limit, and its
metadata is tidied as Go's omitempty would; plus the checks of a request's revisions and
DELETE preconditions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skiff.api import ApiError, KindInfo, Reason, lookup, prune_unknown_fields
from skiff.api.bytesfields import decode_bytes_fields
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.api.validation import revision_problem
from skiff.apiserver.storage.values import KeyValue
from skiff.rpc import MAX_OBJECT_BYTES, encode


def name_of(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def strip_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


# Go's omitempty: an empty map or list in these ObjectMeta fields is not written, so
# `annotations: {}` (which kubectl's apply patches carry) never shows in a stored object.
_OMIT_EMPTY_METADATA = ("labels", "annotations", "finalizers", "ownerReferences",
                        "managedFields")


def omit_empty_metadata(meta: Obj) -> None:
    for name in _OMIT_EMPTY_METADATA:
        if name in meta and not meta[name]:
            del meta[name]


def check_size(info: KindInfo, obj: Obj) -> None:
    """413 when the encoded object is over etcd's request limit (1.5 MiB)."""
    size = len(encode(obj))
    if size > MAX_OBJECT_BYTES:
        raise ApiError(Reason.REQUEST_ENTITY_TOO_LARGE,
                       f'{info.kind} "{name_of(obj)}" is too large: {size} bytes, the '
                       f"limit is {MAX_OBJECT_BYTES} bytes (1.5 MiB)")

def prune(obj: Obj, field_validation: str, info: KindInfo | None = None,
          unknown_fields: Callable[[Obj], list[str]] = prune_unknown_fields) -> list[str]:
    """Decode []byte fields and drop unknown ones (`unknown_fields`: the kind strategy's
    pruning); the warnings (or, Strict, the 400)."""
    # kube-apiserver's decode error wording, as kubectl shows it
    prefix = (f'{info.kind} in version "{info.version}" cannot be handled as a '
              f"{info.kind}: ") if info is not None else ""
    undecodable = decode_bytes_fields(obj)  # base64 []byte fields (Secret data)
    if undecodable:
        raise ApiError.bad_request(f"{prefix}{undecodable}")
    unknown = unknown_fields(obj)
    if unknown and field_validation == "Strict":
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise ApiError.bad_request(f"{prefix}strict decoding error: {listed}")
    if field_validation == "Ignore":
        return []
    return [f'unknown field "{p}"' for p in unknown]

def check_identity(info: KindInfo, namespace: str | None, obj: Obj,
                   name: str | None = None) -> Obj:
    """A copy of `obj` with the kind, apiVersion, namespace and name the request
    addresses, or 400 when the body names others."""
    if not isinstance(obj, dict):
        raise ApiError.bad_request("object: must be a map (a Kubernetes object)")
    obj = deep_copy(obj)
    kind = obj.get("kind")
    if kind not in (None, info.kind):
        raise ApiError.bad_request(
            f"kind: the object's kind {kind!r} does not match the resource "
            f"{info.resource!r}; send it to /{lookup(str(kind)).resource}"
            if _known(str(kind)) else
            f"kind: {kind!r} is not a kind Skiff serves")
    api_version = obj.get("apiVersion")
    if api_version not in (None, info.api_version):
        raise ApiError.bad_request(
            f"apiVersion: {api_version!r} is not served for {info.kind}; "
            f"use {info.api_version!r}")
    obj["kind"], obj["apiVersion"] = info.kind, info.api_version
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata: must be a map")
    # SPEC AU5: what is written is what the request names (and was authorized): a
    # body naming another namespace or object is refused with Kubernetes' messages.
    if info.namespaced:
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request")
        meta["namespace"] = meta.get("namespace") or namespace or "default"
    else:
        meta.pop("namespace", None)
    if name is not None and meta.get("name") and meta["name"] != name:
        raise ApiError.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL "
            f"({name})")
    if name is not None:
        meta["name"] = name
    return obj


def nonzero_revision(value: Any) -> bool:
    try:
        return int(str(value)) != 0
    except ValueError:
        return False


def check_revision(name: str, value: int) -> None:
    problem = revision_problem(value)
    if problem:
        raise ApiError.bad_request(f"{name}: Invalid value: {value}: {problem}")


def _known(kind: str) -> bool:
    try:
        lookup(kind)
    except ApiError:
        return False
    return True


def check_preconditions(info: KindInfo, name: str, cur: KeyValue,
                         preconditions: Obj | None) -> None:
    if not preconditions:
        return
    assert cur.obj is not None
    uid = preconditions.get("uid")
    if uid and cur.obj["metadata"].get("uid") != uid:
        raise ApiError.conflict(
            info.resource, name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            f"{cur.obj['metadata'].get('uid')}")
    rv = preconditions.get("resourceVersion")
    if rv and str(rv) != str(cur.mod_revision):
        raise ApiError.conflict(
            info.resource, name,
            f"Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in "
            f"object meta: {cur.mod_revision}")


def with_finalizers(obj: Obj, finalizers: list[str]) -> Obj:
    """`obj` with `finalizers` added (a copy; `obj` itself when none is new or it is being
    deleted already): what a strategy's DELETE adds before the deletion is decided."""
    meta = obj["metadata"]
    added = [f for f in finalizers if f not in (meta.get("finalizers") or [])]
    if not added or meta.get("deletionTimestamp"):
        return obj
    changed = deep_copy(obj)
    changed["metadata"]["finalizers"] = [*(meta.get("finalizers") or []), *added]
    return changed
