"""List pagination's continue tokens, as Kubernetes' storage encodes them (`continue`).

A continue token names the revision the first page was read at and the key the next page
starts from, so every page of one list is a consistent snapshot. When etcd has compacted
that revision the token is expired: 410 Gone, and the client starts a new list. The token
is opaque to clients (base64 of a small JSON document, shaped like kube-apiserver's).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from skiff.api.errors import ApiError

_VERSION = "meta.k8s.io/v1"


@dataclass(frozen=True)
class Continue:
    revision: int
    start: str  # the key, relative to the list's prefix, the next page starts from


def encode_continue(revision: int, start: str) -> str:
    doc = json.dumps({"v": _VERSION, "rv": revision, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(doc.encode()).decode()


def decode_continue(token: str) -> Continue:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError, UnicodeError):
        raise ApiError.bad_request("continue: the continue token is not valid (it must be "
                                   "one an earlier list of this resource returned)") from None
    if (not isinstance(doc, dict) or doc.get("v") != _VERSION
            or not isinstance(doc.get("rv"), int) or doc["rv"] <= 0
            or not isinstance(doc.get("start"), str) or not doc["start"]
            or doc["start"].startswith("/") or ".." in doc["start"].split("/")):
        raise ApiError.bad_request("continue: the continue token is not valid (it must be "
                                   "one an earlier list of this resource returned)")
    return Continue(int(doc["rv"]), str(doc["start"]))


def expired(revision: int) -> ApiError:
    """A continue token whose list revision (`revision`) etcd has compacted: Kubernetes'
    410 Expired."""
    return ApiError.gone(
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter.")
