"""Server-side apply and `managedFields` (SPEC AX1), as Kubernetes' structured-merge-diff
does them, for the kinds Skiff serves.

Every write through the Kubernetes front records which manager set which fields, in
`metadata.managedFields` (`fieldsV1`: `f:<field>`, `k:{<list map keys>}`, `v:<set value>`,
`.` for a list item itself). An apply (`application/apply-patch+yaml`) by one manager:
- fails with 409 Conflict when it sets a field another manager owns to a different value,
  naming each manager and field (`Apply failed with 1 conflict: conflict with "alice":
  .metadata.labels.tier`), unless `force=true`, which takes the fields over;
- merges the configuration into the live object as structured-merge-diff does: maps by
  key, lists by their list map keys from Kubernetes' schema (containers and env vars by
  `name`, Service ports by `port`+`protocol`, a key left out taking its default), sets as
  unions, atomic lists replaced;
- then prunes what this manager applied last time and no longer applies, unless another
  manager (or this configuration) still owns it: a keyed list item is removed whole, by its
  keys, never field by field, and a map this manager applied empty and now fills is kept.
Other writes (create, update, merge/JSON/strategic patches) become `Update` entries owning
the fields they changed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.errors import FieldError
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.apiserver.endpoints.openapi import schemas as openapi
from skiff.clock import rfc3339

Path = tuple[str, ...]

_OWNED_META = ("labels", "annotations", "finalizers", "ownerReferences")


def field_set(kind: str, obj: Obj, subresource: str = "") -> set[Path]:
    """The fields an object sets, as fieldsV1 paths: its status only for the status
    subresource, everything but its status otherwise."""
    found: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status") != (subresource == "status"):
            continue
        if key == "metadata":
            for meta_key in _OWNED_META:
                if meta_key in (value or {}):
                    _walk(kind, ("metadata", meta_key), value[meta_key],
                          ("f:metadata", f"f:{meta_key}"), found)
            continue
        _walk(kind, (key,), value, (f"f:{key}",), found)
    return found


def _walk(kind: str, schema_path: Path, value: Any, path: Path, found: set[Path]) -> None:
    schema = openapi.field_schema(kind, schema_path) or {}
    if isinstance(value, dict) and value and schema.get("x-kubernetes-map-type") != "atomic":
        for key, child in value.items():
            _walk(kind, (*schema_path, key), child, (*path, f"f:{key}"), found)
        return
    if isinstance(value, list) and value:
        keys = _list_map_keys(schema)
        if keys and all(isinstance(v, dict) for v in value):
            for item in value:
                item_path = (*path, _key_element(item, keys))
                found.add((*item_path, "."))
                for key, child in item.items():
                    _walk(kind, (*schema_path, "[]", key), child, (*item_path, f"f:{key}"),
                          found)
            return
        if _is_set(schema):
            for item in value:
                found.add((*path, "v:" + json.dumps(item, separators=(",", ":"))))
            return
    found.add(path)


def _list_map_keys(schema: Obj) -> list[str]:
    if schema.get("x-kubernetes-list-type") == "map":
        return list(schema.get("x-kubernetes-list-map-keys") or [])
    if "merge" in str(schema.get("x-kubernetes-patch-strategy", "")):
        key = schema.get("x-kubernetes-patch-merge-key")
        return [key] if key else []
    return []


def _is_set(schema: Obj) -> bool:
    return schema.get("x-kubernetes-list-type") == "set" or (
        "merge" in str(schema.get("x-kubernetes-patch-strategy", ""))
        and not schema.get("x-kubernetes-patch-merge-key"))


# Defaults of list map keys a configuration may leave out, as Kubernetes' schema declares
# them (`+default="TCP"` on ContainerPort and ServicePort): the item's identity uses them.
_KEY_DEFAULTS = {"protocol": "TCP"}


def _key_value(item: Obj, key: str) -> Any:
    return item[key] if item.get(key) is not None else _KEY_DEFAULTS.get(key)


def _key_element(item: Obj, keys: list[str]) -> str:
    return "k:" + json.dumps({k: _key_value(item, k) for k in sorted(keys)},
                             separators=(",", ":"))


def _canonical(path: Path) -> Path:
    """A path with its list map keys' defaults filled in (entries Skiff wrote before it
    knew them say `"protocol":null`)."""
    if not any(e.startswith("k:") and "null" in e for e in path):
        return path
    out = []
    for element in path:
        if element.startswith("k:"):
            keys = json.loads(element[2:])
            element = "k:" + json.dumps(
                {k: v if v is not None else _KEY_DEFAULTS.get(k) for k, v in keys.items()},
                separators=(",", ":"))
        out.append(element)
    return tuple(out)


def to_fields_v1(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    return root


def from_fields_v1(fields: Obj, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for element, child in fields.items():
        if isinstance(child, dict) and child:
            found |= from_fields_v1(child, (*prefix, element))
        else:
            found.add((*prefix, element))
    return found


def _value(obj: Any, path: Path) -> Any:
    """The value at a fieldsV1 path, or a marker when it is absent."""
    node = obj
    for element in path:
        if element == ".":
            return node
        kind, _, text = element.partition(":")
        if kind == "f" and isinstance(node, dict) and text in node:
            node = node[text]
        elif kind == "k" and isinstance(node, list):
            wanted = json.loads(text)
            node = next((v for v in node if _key_matches(v, wanted)), _ABSENT)
        elif kind == "v" and isinstance(node, list):
            value = json.loads(text)
            node = value if value in node else _ABSENT
        else:
            return _ABSENT
        if node is _ABSENT:
            return node
    return node


_ABSENT = object()


def _key_matches(item: Any, wanted: Obj) -> bool:
    """A list item with these map keys; a key left out (null) matches its defaulted value
    (`ports` keyed by containerPort and protocol, protocol defaulted to TCP)."""
    return isinstance(item, dict) and all(w is None or _key_value(item, k) == w
                                          for k, w in wanted.items())


def _remove(obj: Any, path: Path) -> None:
    if path and path[-1] == ".":
        path = path[:-1]
    parent = _value(obj, path[:-1]) if len(path) > 1 else obj
    kind, _, text = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif kind == "k" and isinstance(parent, list):
        wanted = json.loads(text)
        parent[:] = [v for v in parent if not _key_matches(v, wanted)]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(text)
        parent[:] = [v for v in parent if v != value]


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: `.spec.containers[name="main"].image`."""
    text = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if element == ".":
            continue
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            keys = json.loads(rest)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        else:
            text += f"[={rest}]"
    return text


def _entries(obj: Obj) -> list[Obj]:
    return [e for e in (obj.get("metadata", {}).get("managedFields") or [])
            if isinstance(e, dict)]


def _entry_paths(entry: Obj) -> set[Path]:
    return {_canonical(p) for p in from_fields_v1(entry.get("fieldsV1") or {})}


def _now() -> str:
    return rfc3339(time.time())


def _manager_label(entry: Obj) -> str:
    name = json.dumps(entry.get("manager", ""))
    if entry.get("operation") == "Update":
        return f"{name} using {entry.get('apiVersion', '')}"
    return name


def _set_entries(obj: Obj, entries: list[Obj]) -> None:
    kept = [e for e in entries if e.get("fieldsV1")]
    obj.setdefault("metadata", {})["managedFields"] = kept


def server_side_apply(kind: str, live: Obj | None, applied: Obj, *, manager: str,
                      force: bool) -> Obj:
    """The object after `manager` applies `applied` to `live` (None: it is created)."""
    if not manager:
        raise ApiError.bad_request("fieldManager: Required value: is required for apply "
                                   "patch")
    mine = field_set(kind, applied)
    api_version = str(applied.get("apiVersion", ""))
    if live is None:
        result = deep_copy(applied)
        _set_entries(result, [_entry(manager, "Apply", api_version, mine)])
        return result
    entries = _entries(live)
    previous = next((e for e in entries if e.get("manager") == manager
                     and e.get("operation") == "Apply"), None)
    others = [e for e in entries if e is not previous]
    conflicts: list[tuple[Obj, Path]] = []
    for entry in others:
        for path in sorted(_entry_paths(entry) & mine):
            live_value = _value(live, path)
            if (path[-1] != "." and live_value is not _ABSENT
                    and live_value != _value(applied, path)):
                conflicts.append((entry, path))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    result = _merge_applied(kind, live, applied)
    if previous is not None:
        still_owned = set(mine).union(*(_entry_paths(e) for e in others))
        _prune(result, _entry_paths(previous), still_owned)
    new_others = []
    for entry in others:
        lost = {p for e, p in conflicts if e is entry}
        # as for any write, a manager no longer owns the fields the apply removed
        kept = {p for p in _entry_paths(entry) - lost
                if _value(result, p) is not _ABSENT or _value(live, p) is _ABSENT}
        new_others.append({**entry, "fieldsV1": to_fields_v1(kept)} if kept else {})
    if previous is not None and not conflicts and _entry_paths(previous) == mine:
        unchanged = deep_copy(result)
        unchanged["metadata"]["managedFields"] = entries
        if unchanged == live:  # re-applying the same configuration changes nothing
            return deep_copy(live)
    _set_entries(result, [*new_others, _entry(manager, "Apply", api_version, mine)])
    return result


def _merge_applied(kind: str, live: Obj, applied: Obj) -> Obj:
    """`live` with the applied configuration merged in: of its metadata only the fields
    managedFields tracks (labels, annotations, finalizers, ownerReferences)."""
    result = deep_copy(live)
    for key, value in applied.items():
        if key == "metadata":
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(kind, (key,), result.get(key), value)
    meta = applied.get("metadata") or {}
    for key in _OWNED_META:
        if key not in meta:
            continue
        target = result.setdefault("metadata", {})
        if meta[key] is None:
            target.pop(key, None)
        else:
            target[key] = _merge(kind, ("metadata", key), target.get(key), meta[key])
    return result


def _merge(kind: str, schema_path: Path, live: Any, config: Any) -> Any:
    """structured-merge-diff's merge of a configured value into a live one: maps merge by
    key (unless atomic), keyed lists by their keys, sets as unions; anything else (scalars,
    atomic lists and maps, a type change) is the configured value."""
    schema = openapi.field_schema(kind, schema_path) or {}
    if isinstance(config, dict) and isinstance(live, dict) and (
            schema.get("x-kubernetes-map-type") != "atomic"):
        merged = dict(live)
        for key, value in config.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = _merge(kind, (*schema_path, key), live.get(key), value)
        return merged
    if isinstance(config, list) and isinstance(live, list):
        keys = _list_map_keys(schema)
        if keys and all(isinstance(v, dict) for v in (*live, *config)):
            return _merge_keyed(kind, (*schema_path, "[]"), live, config, keys)
        if _is_set(schema):
            return [*live, *(v for v in config if v not in live)]
    return _without_nulls(config)


def _merge_keyed(kind: str, item_path: Path, live: list[Obj], config: list[Obj],
                 keys: list[str]) -> list[Obj]:
    """Two keyed lists merged item by item (an item with the same keys merged with the
    configured one), in structured-merge-diff's order: the two lists are walked side by
    side, items only live stay where they were, the configured items come in the
    configuration's order."""
    live_ids = [_key_element(v, keys) for v in live]
    config_ids = [_key_element(v, keys) for v in config]
    live_by: dict[str, Obj] = {}
    for ident, item in zip(live_ids, live, strict=True):
        live_by.setdefault(ident, item)
    config_by = dict(zip(config_ids, config, strict=True))
    shared = [ident for ident in config_ids if ident in live_by]
    upcoming = shared.pop(0) if shared else None  # the next item both lists have
    merged: set[str] = set()
    out: list[Obj] = []
    li = ci = 0
    while li < len(live_ids) or ci < len(config_ids):
        if li < len(live_ids) and ci < len(config_ids):
            ident = live_ids[li]
            if ident == config_ids[ci]:
                merged.add(ident)
                out.append(_merge(kind, item_path, live_by[ident], config_by[ident]))
                li, ci = li + 1, ci + 1
                upcoming = shared.pop(0) if shared else None
                continue
            if ident in config_by and upcoming is not None and upcoming != ident:
                li += 1  # a shared item the configuration places later
                continue
        if li < len(live_ids):
            ident = live_ids[li]
            if ident not in config_by:
                out.append(deep_copy(live[li]))
                li += 1
                continue
            if ident in merged:
                li += 1
        if ci < len(config_ids):
            ident = config_ids[ci]
            merged.add(ident)
            out.append(_merge(kind, item_path, live_by.get(ident), config_by[ident]))
            ci += 1
            if upcoming == ident:
                upcoming = shared.pop(0) if shared else None
    return out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _members(paths: set[Path]) -> set[Path]:
    """`paths` (list items without their `.`) and every field above them: owning
    `.data.key1` owns `.data` too, but owning a field of a list item does not own the item
    (structured-merge-diff's EnsureNamedFieldsAreMembers)."""
    found: set[Path] = set()
    for path in paths:
        if path and path[-1] == ".":
            path = path[:-1]
        found.add(path)
        for end in range(1, len(path)):
            if path[end - 1].startswith("f:"):
                found.add(path[:end])
    return found


def _prune(result: Obj, last: set[Path], owned: set[Path]) -> None:
    """Removes from `result` what the applying manager applied last time (`last`) and
    nobody owns now (`owned`: its new configuration and every other manager): whole list
    items and whole fields, parents before children, then the fields above them that are
    left empty. The key fields of an item that stays are never removed: they are its
    identity."""
    still = _members(owned)
    applied = _members_only(last)
    gone: list[Path] = []
    for path in sorted(applied, key=len):
        if path in still or any(path[:len(g)] == g for g in gone):
            continue
        if (len(path) >= 2 and path[-2].startswith("k:")
                and path[-1][2:] in json.loads(path[-2][2:])):
            continue
        if _value(result, path) is not _ABSENT:
            _remove(result, path)
            gone.append(path)
    for path in sorted(_members(last) - applied - still, key=len, reverse=True):
        if _value(result, path) in ({}, []):
            _remove(result, path)


def _members_only(paths: set[Path]) -> set[Path]:
    return {p[:-1] if p and p[-1] == "." else p for p in paths}


def _entry(manager: str, operation: str, api_version: str, paths: set[Path]) -> Obj:
    return {"manager": manager, "operation": operation, "apiVersion": api_version,
            "time": _now(), "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}


def _conflict_error(conflicts: list[tuple[Obj, Path]]) -> ApiError:
    """kube-apiserver's apply conflict: reason Conflict, one cause per field."""
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        text = f"conflict with {_manager_label(entry)}: {path_string(path)}"
        message = f"Apply failed with 1 conflict: {text}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_manager_label(entry), []).append(path_string(path))
        lines = []
        for label in sorted(by_manager):
            lines.append(f"conflicts with {label}:")
            lines.extend(f"- {p}" for p in by_manager[label])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    causes = [FieldError(path_string(path), "", f"conflict with {_manager_label(entry)}",
                         reason="FieldManagerConflict") for entry, path in conflicts]
    return ApiError(Reason.CONFLICT, message, causes)


def _in_scope(path: Path, subresource: str) -> bool:
    """Whether a write to `subresource` ("" or "status") can change the field at `path`."""
    return (bool(path) and path[0] == "f:status") == (subresource == "status")


class _SameValues:
    """Whether `old` and `new` hold the same value at a fieldsV1 path, answered from the
    shortest equal prefix (a status write compares `f:status` subtrees once, not each of
    hundreds of leaves: a kubelet's status update costs well under a millisecond)."""

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new = old, new
        self._equal: dict[Path, bool] = {}

    def __call__(self, path: Path) -> bool:
        for end in range(1, len(path) + 1):
            prefix = path[:end]
            equal = self._equal.get(prefix)
            if equal is None:
                equal = self._equal[prefix] = (_value(self.old, prefix)
                                               == _value(self.new, prefix))
            if equal:
                return True
        return False


def record_update(kind: str, old: Obj | None, new: Obj, *, manager: str,
                  subresource: str = "") -> Obj:
    """`new` with managedFields after a non-apply write by `manager`: it owns the fields it
    changed (taken from whoever owned them); fields the write removed are owned by nobody.
    A status write (`subresource="status"`) is its own entry, as in Kubernetes, and leaves
    the ownership of every other field alone; a main write leaves the status's alone."""
    # only managedFields is written: new top and metadata dicts, the rest shared with `new`
    result = {**new, "metadata": dict(new.get("metadata") or {})}
    before = field_set(kind, old, subresource) if old else set()
    after = field_set(kind, new, subresource)
    same = _SameValues(old, new)
    changed = {p for p in after if p not in before or (p[-1] != "." and not same(p))}
    entries = _entries(old) if old else []
    if old is not None and not changed and before == after:
        # nothing changed hands: keep the entries (and their times), so a no-op write
        # stays a no-op
        result.setdefault("metadata", {})["managedFields"] = deep_copy(entries)
        return result
    api_version = str(new.get("apiVersion", ""))
    updated = []
    mine = set(changed)
    for entry in entries:
        owned = _entry_paths(entry)
        paths = {p for p in owned if not _in_scope(p, subresource)} | (
            (owned & after) - changed)
        if (entry.get("manager") == manager and entry.get("operation") == "Update"
                and entry.get("subresource", "") == subresource):
            mine |= paths
            continue
        updated.append({**entry, "fieldsV1": to_fields_v1(paths)} if paths else {})
    if mine:
        entry = _entry(manager, "Update", api_version, mine)
        if subresource:
            entry["subresource"] = subresource
        updated.append(entry)
    _set_entries(result, updated)
    return result


def default_manager(user_agent: str) -> str:
    """Kubernetes' default field manager: the user agent up to its first `/`."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128]
