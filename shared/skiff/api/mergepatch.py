"""RFC 7386 JSON merge patch, shared by the apiserver (`application/merge-patch+json`
bodies) and the clients that patch by get-merge-update (`skiff explore`'s patch steps), so
both apply one definition: maps merge key by key, `null` removes a key, anything else
(lists included) replaces."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` merged in (RFC 7386); neither argument is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
