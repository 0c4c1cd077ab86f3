"""Query parameters read as kube-apiserver reads them, in one place: booleans, and a
list's `limit` and `continue`.

Kubernetes converts `?watch=…`, `?follow=…`, exec's `?stdout=…` and every other boolean
parameter with `Convert_Slice_string_To_bool`: absent is false; present, only `0` and `false`
(in any case) are false, and everything else — `true`, `True` (what clients that format
Python booleans send), `1`, an empty value — is true.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.apiserver.endpoints.handlers import decoding


def query_bool(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")


def list_options(query: Mapping[str, str]) -> dict[str, Any]:
    """`limit` and `continue` from an HTTP list's query string, as registry.list takes them."""
    limit = decoding.go_int("limit", query.get("limit", "") or "0")
    return {"limit": max(limit, 0), "continue_token": query.get("continue", "")}
