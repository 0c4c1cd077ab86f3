"""The oracle of `skiff explore` (SPEC CT2): is a test run's end state the reference run's?

Two runs of the same workload never agree byte for byte: UIDs, resourceVersions,
timestamps and names made from `generateName` differ every time. `normalize` masks those (a
generated name `db-x7f2k` becomes `db-*`, wherever in the snapshot it is referenced; a
timestamp `<time>`; another object's UID `<uid>`; a certificate `<pem>`), and `learn_mask`
learns the fields a controller fills with random data by comparing fault-free runs: what
differs between two of them is no finding. `diff` then matches objects by namespace and
masked name — several `db-*` as a multiset, so 2 against 3 is one "extra" with both counts
— and lists what is missing, extra or changed, each in one line a user can read.

Field paths are dotted, list items indexed, keys that are not plain words bracketed:
`metadata.labels[examples.skiff.io/database]`, `status.conditions[0].status`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skiff.api.names import SAFE_ALPHABET
from skiff.api.types import Obj, ObjView
from skiff.explore.snapshot import Snapshot

__all__ = ["Difference", "Mask", "counts", "diff", "differing_paths", "learn_mask",
           "normalize", "normalize_snapshot", "replacements"]

TIME = "<time>"
UID = "<uid>"
PEM = "<pem>"
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})$")
_SUFFIX = re.compile(f"^[{SAFE_ALPHABET}]{{5}}$")
_MAX_BASE = 58  # a generateName base is cut so the name fits 63 characters
_DROPPED = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation",
            "managedFields", "selfLink")
_WORD = re.compile(r"^[A-Za-z0-9_-]+$")
_ABSENT = object()
_SHOWN_PATHS = 3


def _is_time(value: Any) -> bool:
    return isinstance(value, str) and _TIMESTAMP.match(value) is not None


def generated(meta: ObjView) -> str | None:
    """`db-*` for an object named from `generateName: db-` (the base and five characters of
    Kubernetes' random alphabet), else None."""
    base = str(meta.get("generateName") or "")[:_MAX_BASE]
    name = str(meta.get("name") or "")
    if base and name.startswith(base) and _SUFFIX.match(name[len(base):]):
        return f"{base}*"
    return None


def replacements(objects: Iterable[ObjView]) -> dict[str, str]:
    """The strings that differ between runs and what they become: generated names → their
    masked form, UIDs → `<uid>`."""
    found: dict[str, str] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        if uid := meta.get("uid"):
            found[str(uid)] = UID
        if (masked := generated(meta)) is not None:
            found[str(meta["name"])] = masked
    return found


def normalize(resource: str, obj: ObjView, *,
              replace: Mapping[str, str] | None = None) -> Obj:
    """`obj` as two runs that made the same decisions store it alike: the server's
    bookkeeping dropped (uid, resourceVersion, creation/deletion timestamps — a deleting
    object keeps `metadata.terminating: true` —, generation, managedFields, selfLink,
    ownerReferences' uids, timestamp annotations), every RFC 3339 timestamp `<time>`, every
    PEM text (`kube-root-ca.crt`: each fresh cluster has its own CA) `<pem>`, and
    each string of `replace` (by default: this object's own generated name and UID; give
    `replacements()` of the whole snapshot to mask references between objects) replaced."""
    table = dict(replace) if replace is not None else replacements([obj])
    result = copy.deepcopy(dict(obj))
    meta = result.get("metadata")
    if isinstance(meta, dict):
        if meta.get("deletionTimestamp"):
            meta["terminating"] = True
        for key in _DROPPED:
            meta.pop(key, None)
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, dict):
                ref.pop("uid", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            meta["annotations"] = {k: v for k, v in annotations.items() if not _is_time(v)}
            if not meta["annotations"]:
                del meta["annotations"]
    masked = _mask_strings(result, table)
    assert isinstance(masked, dict)
    return masked


def _mask_strings(value: Any, table: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _mask_strings(v, table) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_strings(v, table) for v in value]
    if isinstance(value, str):
        if _is_time(value):
            return TIME
        if "-----BEGIN " in value:  # every fresh cluster has its own CA and certificates
            return PEM
        return table.get(value, value)
    return value


def normalize_snapshot(snapshot: Snapshot) -> Snapshot:
    """Every object normalized, references between them (a status naming a generated
    child) masked alike."""
    table = replacements(obj for objects in snapshot.values() for obj in objects)
    return {resource: [normalize(resource, obj, replace=table) for obj in objects]
            for resource, objects in snapshot.items()}


def counts(snapshot: Snapshot) -> dict[str, int]:
    """How many objects of each resource."""
    return {resource: len(objects) for resource, objects in snapshot.items()}


# -- field paths ---------------------------------------------------------------------------


def _join(prefix: str, key: str) -> str:
    part = key if _WORD.match(key) else f"[{key}]"
    if not prefix:
        return part
    return f"{prefix}.{part}" if _WORD.match(key) else f"{prefix}{part}"


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def differing_paths(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(path, value in a, value in b) of every field that differs; a list of another
    length differs as a whole; an absent side is `_ABSENT`."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[tuple[str, Any, Any]] = []
        for key in sorted(set(a) | set(b), key=str):
            path = _join(prefix, str(key))
            if key not in a or key not in b:
                found.append((path, a.get(key, _ABSENT), b.get(key, _ABSENT)))
            else:
                found.extend(differing_paths(a[key], b[key], path))
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in differing_paths(x, y, f"{prefix}[{i}]")]
    return [] if _same(a, b) else [(prefix, a, b)]


def _strip(value: Any, masked: frozenset[str], prefix: str = "") -> Any:
    """`value` without the fields at `masked` paths (a list item there reads `<masked>`)."""
    if not masked:
        return value
    if isinstance(value, dict):
        return {k: _strip(v, masked, _join(prefix, str(k))) for k, v in value.items()
                if _join(prefix, str(k)) not in masked}
    if isinstance(value, list):
        return ["<masked>" if f"{prefix}[{i}]" in masked
                else _strip(v, masked, f"{prefix}[{i}]") for i, v in enumerate(value)]
    return value


# -- matching ------------------------------------------------------------------------------


def _groups(objects: Sequence[ObjView]) -> dict[tuple[str, str], list[Obj]]:
    """Objects by (namespace, masked name), each group in canonical order."""
    groups: dict[tuple[str, str], list[Obj]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        groups.setdefault(key, []).append(dict(obj))
    for members in groups.values():
        members.sort(key=_canonical)
    return groups


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _pairs(left: list[Obj], right: list[Obj]) -> list[tuple[Obj, Obj]]:
    """Equal-length lists paired, each of `left` with the closest remaining of `right`."""
    remaining = list(right)
    pairs = []
    for a in left:
        best = min(range(len(remaining)),
                   key=lambda i: len(differing_paths(a, remaining[i])))
        pairs.append((a, remaining.pop(best)))
    return pairs


def _unmatched(left: list[Obj], right: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """Both lists without the objects they have in common (as multisets)."""
    rest = [_canonical(o) for o in right]
    only_left = []
    for obj in left:
        text = _canonical(obj)
        if text in rest:
            rest.remove(text)
        else:
            only_left.append(obj)
    only_right = [json.loads(text) for text in rest]
    return only_left, only_right


COUNT = "#count "  # a Mask path `#count ns/name`: how many objects have that key varies


@dataclass(frozen=True)
class Mask:
    # (resource, field path) whose value varies by itself; (resource, "#count ns/name")
    # when even the number of objects of that (masked) name does
    paths: frozenset[tuple[str, str]]

    def of(self, resource: str) -> frozenset[str]:
        return frozenset(path for r, path in self.paths if r == resource)


def _label(key: tuple[str, str]) -> str:
    namespace, name = key
    return f"{namespace}/{name}" if namespace else name


def learn_mask(runs: Sequence[Snapshot]) -> Mask:
    """The fields whose values differ between fault-free runs (after `normalize`): random
    data the controller writes, which `diff` then ignores; and the names of which the runs
    hold different numbers of objects, whose counts `diff` then ignores."""
    normalized = [normalize_snapshot(run) for run in runs]
    paths: set[tuple[str, str]] = set()
    for other in normalized[1:]:
        first = normalized[0]
        for resource in set(first) & set(other):
            mine, theirs = _groups(first[resource]), _groups(other[resource])
            for key in set(mine) | set(theirs):
                if len(mine.get(key, [])) != len(theirs.get(key, [])):
                    paths.add((resource, COUNT + _label(key)))
                    continue
                for a, b in _pairs(mine[key], theirs[key]):
                    paths.update((resource, path) for path, _, _ in differing_paths(a, b))
    return Mask(frozenset(paths))


@dataclass(frozen=True)
class Difference:
    resource: str
    key: str  # "namespace/name"; a generated name as "ns/db-*" (or "ns/db-*#1" for one)
    change: str  # "missing" | "extra" | "changed"
    paths: tuple[str, ...]  # for changed: the field paths that differ
    text: str  # one line for a user


def diff(reference: Snapshot, test: Snapshot, *, mask: Mask) -> list[Difference]:
    """What the test run's end state has that the reference run's has not (and the other
    way), by resource, then namespace/name."""
    ref_norm, test_norm = normalize_snapshot(reference), normalize_snapshot(test)
    found: list[Difference] = []
    for resource in [*ref_norm, *(r for r in test_norm if r not in ref_norm)]:
        masked = mask.of(resource)
        mine = _groups([_strip(o, masked) for o in ref_norm.get(resource, [])])
        theirs = _groups([_strip(o, masked) for o in test_norm.get(resource, [])])
        for key in sorted(set(mine) | set(theirs)):
            ref, here = mine.get(key, []), theirs.get(key, [])
            if len(ref) != len(here) and COUNT + _label(key) in masked:
                continue
            found.extend(_compare(resource, key, ref, here))
    return found


def _compare(resource: str, key: tuple[str, str], ref: list[Obj],
             test: list[Obj]) -> list[Difference]:
    name, label = key[1], _label(key)
    several = name.endswith("*") or len(ref) > 1 or len(test) > 1
    if len(ref) != len(test):
        change = "extra" if len(test) > len(ref) else "missing"
        if several:
            how = f"{len(ref)} in the reference run, {len(test)} here"
        else:
            how = "not in the reference run" if change == "extra" else \
                "in the reference run, not here"
        return [Difference(resource, label, change, (), f"{change} {resource} {label} ({how})")]
    only_ref, only_test = _unmatched(ref, test)
    found = []
    for i, (a, b) in enumerate(_pairs(only_ref, only_test)):
        changes = differing_paths(a, b)
        where = f"{label}#{i + 1}" if several else label
        shown = "; ".join(f"{path} {_shown(x)} in the reference run, {_shown(y)} here"
                          for path, x, y in changes[:_SHOWN_PATHS])
        more = f" (and {len(changes) - _SHOWN_PATHS} more)" if len(changes) > _SHOWN_PATHS \
            else ""
        found.append(Difference(resource, where, "changed", tuple(p for p, _, _ in changes),
                                f"changed {resource} {where}: {shown}{more}"))
    return found


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
