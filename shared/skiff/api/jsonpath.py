"""The JSONPath subset CustomResourceDefinitions use (SPEC EX4): `additionalPrinterColumns`
(`.status.conditions[?(@.type=="Ready")].status`), the scale subresource's paths
(`.spec.replicas`) and `selectableFields`. Kubernetes evaluates these with client-go's
jsonpath; a CRD's paths are simple (fields, indexes, `[*]`, equality filters), so this
module reads exactly those and nothing is executed.
"""

from __future__ import annotations

import re
from typing import Any

# one step: .field | ['field'] | [index] | [*] | [?(@.a.b=="v")]
_STEP = re.compile(r"""
    \.(?P<field>[A-Za-z0-9_\-$]+)
  | \[['"](?P<quoted>[^'"]+)['"]\]
  | \[(?P<index>-?\d+)\]
  | \[(?P<all>\*)\]
  | \[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*==\s*['"]?(?P<fvalue>[^'")]*)['"]?\)\]
""", re.VERBOSE)


class JsonPathError(ValueError):
    """A path outside the subset (or not a path at all)."""


def parse(path: str) -> list[tuple[str, str]]:
    """`path` (with or without kubectl's `{}`) as steps: (kind, argument) pairs."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if not text.startswith((".", "[")):
        raise JsonPathError(f"{path!r}: a JSON path starts with '.'")
    steps: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise JsonPathError(f"{path!r}: cannot read the path at {text[pos:]!r}")
        if match["field"] is not None or match["quoted"] is not None:
            steps.append(("field", match["field"] or match["quoted"]))
        elif match["index"] is not None:
            steps.append(("index", match["index"]))
        elif match["all"] is not None:
            steps.append(("all", ""))
        else:
            steps.append(("filter", f"{match['fpath']}={match['fvalue']}"))
        pos = match.end()
    return steps


def _filter_matches(item: Any, argument: str) -> bool:
    path, _, wanted = argument.partition("=")
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    if isinstance(value, bool):
        return str(value).lower() == wanted
    return str(value) == wanted


def find(obj: Any, path: str) -> list[Any]:
    """Every value `path` selects in `obj` (empty when none)."""
    current: list[Any] = [obj]
    for kind, argument in parse(path):
        found: list[Any] = []
        for value in current:
            if kind == "field" and isinstance(value, dict) and argument in value:
                found.append(value[argument])
            elif kind == "index" and isinstance(value, list):
                index = int(argument)
                if -len(value) <= index < len(value):
                    found.append(value[index])
            elif kind == "all" and isinstance(value, list | dict):
                found.extend(value if isinstance(value, list) else value.values())
            elif kind == "filter" and isinstance(value, list):
                found.extend(item for item in value if _filter_matches(item, argument))
        current = found
    return current


def first(obj: Any, path: str) -> Any:
    """The first value `path` selects, or None."""
    found = find(obj, path)
    return found[0] if found else None


def set_value(obj: dict[str, Any], path: str, value: Any) -> None:
    """Write `value` at a path of plain fields (`.spec.replicas`), making the maps on the
    way; the scale subresource writes through this."""
    steps = parse(path)
    if not steps or any(kind != "field" for kind, _ in steps):
        raise JsonPathError(f"{path!r}: only a path of fields can be written")
    target = obj
    for _, name in steps[:-1]:
        child = target.get(name)
        if not isinstance(child, dict):
            child = target[name] = {}
        target = child
    target[steps[-1][1]] = value
