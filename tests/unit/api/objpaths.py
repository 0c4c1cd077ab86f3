"""`with_`: a copy of an object with one dotted field path set or removed, so a validation
test states the one field it breaks instead of spelling the whole object again; `paths`:
the (field path, error type) pairs validation reports."""

from __future__ import annotations

import copy
import re
from typing import Any

from skiff.api import validate

MISSING = object()


def with_(obj: dict[str, Any], path: str, value: Any = MISSING) -> dict[str, Any]:
    """A copy of `obj` with the dotted path (`spec.containers[0].name`) set or removed."""
    result = copy.deepcopy(obj)
    parts: list[str | int] = []
    for part in path.split("."):
        match = re.fullmatch(r"([^\[]+)((?:\[\d+\])*)", part)
        assert match is not None
        parts.append(match.group(1))
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", match.group(2))]
    node: Any = result
    for key, nxt in zip(parts, parts[1:], strict=False):
        if isinstance(key, str) and key not in node:
            node[key] = [] if isinstance(nxt, int) else {}
        node = node[key]
    if value is MISSING:
        del node[parts[-1]]
    elif isinstance(node, list) and parts[-1] == len(node):
        node.append(value)
    else:
        node[parts[-1]] = value
    return result


def paths(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    return [(e.path, e.type) for e in validate(obj, old=old)]
