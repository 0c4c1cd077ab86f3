"""Boolean query parameters read as kube-apiserver reads them, in one place.

Kubernetes converts `?watch=…`, `?follow=…`, exec's `?stdout=…` and every other boolean
parameter with `Convert_Slice_string_To_bool`: absent is false; present, only `0` and `false`
(in any case) are false, and everything else — `true`, `True` (what clients that format
Python booleans send), `1`, an empty value — is true.
"""

from __future__ import annotations

from collections.abc import Mapping


def query_bool(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")
