"""The resource commands: apply, get, delete, history, label (describe and logs are
`describe`'s, fence and unfence `fencing`'s).

Each is an async function taking the parsed arguments and an `ApiClient`; output goes to
the `out` callable so tests can capture it. Errors are `ApiError` or `CliError`, which
`skiff.cli.main` prints as one line.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from skiff.api import ApiError, Reason, lookup
from skiff.api import tables as printers
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.client.conflicts import retry_on_conflict
from skiff.cluster.config import yaml_problem

Out = Callable[[str], None]

FORCE_WARNING = (
    "warning: Force deleting a pod does not wait for the pod to terminate, meaning\n"
    "         your containers will be stopped asynchronously. Pass --force to\n"
    "         continue")
IMMEDIATE_WARNING = (
    "Warning: Immediate deletion does not wait for confirmation that the running resource "
    "has been terminated. The resource may continue to run on the cluster indefinitely.")


class CliError(Exception):
    """A usage problem; the message says what to do."""


def kind_of(name: str) -> KindInfo:
    try:
        return lookup(name)
    except ApiError:
        raise CliError(f'the server doesn\'t have a resource type "{name}"') from None


def namespace_for(info: KindInfo, namespace: str | None) -> str | None:
    return (namespace or "default") if info.namespaced else None


# -- apply -------------------------------------------------------------------------------


def load_documents(source: str, stdin_text: Callable[[], str]) -> list[Obj]:
    try:
        text = stdin_text() if source == "-" else Path(source).read_text()
    except OSError as err:
        raise CliError(f"cannot read {source}: {err.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise CliError(f"{source}: not valid YAML: {yaml_problem(err)}") from None
    out: list[Obj] = []
    for i, doc in enumerate(docs):
        items = doc.get("items") if isinstance(doc, dict) and str(
            doc.get("kind", "")).endswith("List") else [doc]
        for item in items or []:
            if not isinstance(item, dict) or not item.get("kind"):
                raise CliError(f"{source}: document {i + 1}: kind: Required value "
                               "(every document needs apiVersion, kind and metadata.name)")
            out.append(item)
    if not out:
        raise CliError(f"{source}: no objects to apply")
    return out


async def apply(api: ApiClient, docs: list[Obj], *, namespace: str | None, out: Out) -> None:
    """Apply each document; one that fails is reported and the rest still applied (as
    kubectl does); a CliError listing every failure is raised at the end."""
    failures: list[str] = []
    for doc in docs:
        try:
            await _apply_one(api, doc, namespace=namespace, out=out)
        except ApiError as err:
            failures.append(f"Error from server ({err.reason}): {err.message}")
        except CliError as err:
            failures.append(str(err) if str(err).startswith("error") else f"error: {err}")
    if failures:
        raise CliError("\n".join(failures))


async def _apply_one(api: ApiClient, doc: Obj, *, namespace: str | None, out: Out) -> None:
    info = kind_of(str(doc["kind"]))
    meta = doc.setdefault("metadata", {})
    if info.namespaced and not meta.get("namespace"):
        meta["namespace"] = namespace or "default"
    ref = f"{info.kind.lower()}/{meta.get('name', '')}"
    try:
        await api.create(doc)
        verb = "created"
    except ApiError as err:
        if err.reason != Reason.ALREADY_EXISTS:
            raise
        async def configure() -> tuple[Obj, Obj]:
            current = await api.get(info.resource, meta["name"], meta.get("namespace"))
            return current, await api.update(_merge_for_apply(current, doc))

        current, updated = await retry_on_conflict(configure)
        same = (updated["metadata"]["resourceVersion"]
                == current["metadata"]["resourceVersion"])
        verb = "unchanged" if same else "configured"
    for warning in api.last_warnings:
        out(f"Warning: {warning}")
    out(f"{ref} {verb}")


def _merge_for_apply(current: Obj, desired: Obj) -> Obj:
    """The manifest's fields replace the stored ones; what it does not mention is kept."""
    merged = copy.deepcopy(current)
    for key, value in desired.items():
        if key in ("status", "apiVersion", "kind"):
            continue
        if key == "metadata":
            for mkey in ("labels", "annotations"):
                if mkey in value:
                    kept = {k: v for k, v in (current["metadata"].get(mkey) or {}).items()
                            if k.startswith("skiff.io/")}
                    merged["metadata"][mkey] = {**kept, **value[mkey]}
            continue
        merged[key] = _merge_value(merged[key], value) if key in merged else value
    return merged


def _merge_value(current: object, desired: object) -> object:
    """Merge one manifest field over the stored one, deeply, so the fields the server set
    itself (a ServiceAccount token's volumeMount in a container, defaults) are kept
    rather than read as a change: maps merge key by key, and lists of named items
    (containers, volumes, ports) merge item by item by name, in the manifest's order and
    membership. Anything else, like a command, is the manifest's."""
    if isinstance(current, dict) and isinstance(desired, dict):
        out = dict(current)
        for key, value in desired.items():
            out[key] = _merge_value(current[key], value) if key in current else value
        return out
    if (isinstance(current, list) and isinstance(desired, list)
            and all(isinstance(i, dict) and "name" in i for i in [*current, *desired])):
        by_name = {i["name"]: i for i in current}
        return [_merge_value(by_name[i["name"]], i) if i["name"] in by_name else i
                for i in desired]
    return desired


# -- get ---------------------------------------------------------------------------------


def _dump(obj: Obj, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(obj, indent=2)
    return str(yaml.safe_dump(obj, sort_keys=False)).rstrip()


def kinds_of(names: str) -> list[KindInfo]:
    """`pc,pdb` → each kind, as kubectl takes comma lists of resources and short names."""
    parts = [p for p in names.split(",") if p.strip()]
    if not parts:
        raise CliError(f"no resource type in {names!r}; e.g. `skiff get pods`")
    return [kind_of(p.strip()) for p in parts]


def _qualified(info: KindInfo) -> str:
    """`priorityclass.scheduling.k8s.io` (kubectl's prefix when it prints several kinds)."""
    return f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()


class AlignedRows:
    """Rows printed over time under one header, aligned like kubectl's watch output: the
    first batch sets the column widths (a longer cell later just pushes its row out)."""

    def __init__(self, headers: list[str]) -> None:
        self.headers = headers
        self.widths: list[int] | None = None

    def lines(self, rows: list[list[str]]) -> list[str]:
        lines = []
        if self.widths is None:
            self.widths = [max(len(r[i]) for r in [self.headers, *rows])
                           for i in range(len(self.headers))]
            rows = [self.headers, *rows]
        for row in rows:
            lines.append("   ".join(cell.ljust(self.widths[i])
                                    for i, cell in enumerate(row)).rstrip())
        return lines


def label_columns(keys: list[str]) -> list[printers.Column]:
    """`-L topology.kubernetes.io/zone` → a ZONE column with each object's label value, as
    kubectl's --label-columns (header: the key's last segment, upper case)."""
    columns: list[printers.Column] = []
    for key in [k.strip() for spec in keys for k in spec.split(",") if k.strip()]:
        def value(o: Obj, key: str = key) -> str:
            return str((o.get("metadata", {}).get("labels") or {}).get(key, ""))
        columns.append((key.rsplit("/", 1)[-1].upper(), value))
    return columns


def _columns(info: KindInfo, *, wide: bool, namespace_column: bool,
             labels: list[str]) -> list[printers.Column]:
    return printers.columns_for(info.kind, wide=wide,
                                namespace_column=namespace_column) + label_columns(labels)


async def get(api: ApiClient, kind: str, name: str | None, *, namespace: str | None,
              all_namespaces: bool, output: str, watch: bool, at_revision: int,
              selector: str, out: Out, labels: list[str] | None = None) -> None:
    labels = labels or []
    kinds = kinds_of(kind)
    if len(kinds) > 1:
        if watch:
            raise CliError("watch is only supported on one resource type at a time; "
                           f"run `skiff get {kinds[0].resource} -w` for each")
        await _get_many(api, kinds, name, namespace=namespace, all_namespaces=all_namespaces,
                        output=output, at_revision=at_revision, selector=selector, out=out,
                        labels=labels)
        return
    info = kinds[0]
    ns = None if all_namespaces else namespace_for(info, namespace)
    wide = output == "wide"
    ns_column = all_namespaces and info.namespaced
    items, rv = await _read(api, info, name, ns, at_revision=at_revision, selector=selector)
    if output in ("yaml", "json"):
        if name:
            out(_dump(items[0], output))
        else:
            out(_dump({"apiVersion": "v1", "kind": "List", "items": items,
                       "metadata": {"resourceVersion": rv}}, output))
    elif output == "name":
        for obj in items:
            out(f"{info.kind.lower()}/{obj['metadata']['name']}")
    elif not items and not watch:
        where = f" in {ns} namespace" if ns else ""
        out(f"No resources found{where}.")
    columns = _columns(info, wide=wide, namespace_column=ns_column, labels=labels)
    rows = AlignedRows([header for header, _ in columns])
    if items and output not in ("yaml", "json", "name"):
        out("\n".join(rows.lines([[fn(o) for _, fn in columns] for o in items])))
    if not watch:
        return
    async for ev in api.watch(info.resource, ns, resource_version=str(rv),
                              label_selector=selector, name=name or ""):
        if ev.type == "BOOKMARK":
            continue
        if output in ("yaml", "json"):
            out(_dump(ev.object, output))
        elif output == "name":
            out(f"{info.kind.lower()}/{ev.object['metadata']['name']}")
        else:
            out("\n".join(rows.lines([[fn(ev.object) for _, fn in columns]])))


async def _read(api: ApiClient, info: KindInfo, name: str | None, ns: str | None, *,
                at_revision: int, selector: str) -> tuple[list[Obj], str]:
    if name:
        obj = await api.get(info.resource, name, ns, revision=at_revision)
        return [obj], str(obj["metadata"].get("resourceVersion", ""))
    listed = await api.list(info.resource, ns, label_selector=selector, revision=at_revision)
    items = sorted(listed["items"], key=lambda o: (o["metadata"].get("namespace", ""),
                                                   o["metadata"]["name"]))
    return items, str(listed["metadata"]["resourceVersion"])


async def _get_many(api: ApiClient, kinds: list[KindInfo], name: str | None, *,
                    namespace: str | None, all_namespaces: bool, output: str,
                    at_revision: int, selector: str, out: Out, labels: list[str]) -> None:
    """`skiff get pc,pdb`: one table per kind, names prefixed with the kind, a blank line
    between tables (kubectl's layout); -o yaml/json gives one List of everything."""
    every: list[Obj] = []
    tables: list[str] = []
    for info in kinds:
        ns = None if all_namespaces else namespace_for(info, namespace)
        items, _rv = await _read(api, info, name, ns, at_revision=at_revision,
                                 selector=selector)
        every += items
        if output == "name":
            tables += [f"{_qualified(info)}/{o['metadata']['name']}" for o in items]
        elif items and output not in ("yaml", "json"):
            columns = _columns(info, wide=output == "wide",
                               namespace_column=all_namespaces and info.namespaced,
                               labels=labels)
            prefix = _qualified(info) + "/"
            rows = [[prefix + fn(o) if header == "NAME" else fn(o) for header, fn in columns]
                    for o in items]
            tables.append(printers.table(rows, [header for header, _ in columns]))
    if output in ("yaml", "json"):
        out(_dump({"apiVersion": "v1", "kind": "List", "items": every,
                   "metadata": {"resourceVersion": ""}}, output))
    elif output == "name":
        for line in tables:
            out(line)
    elif tables:
        out("\n\n".join(tables))
    else:
        ns = None if all_namespaces else (namespace or "default")
        out(f"No resources found{f' in {ns} namespace' if ns else ''}.")


# -- delete ------------------------------------------------------------------------------


async def delete(api: ApiClient, kind: str, names: list[str], *, namespace: str | None,
                 grace_period: int | None, force: bool, wait: bool, out: Out,
                 err: Out) -> None:
    info = kind_of(kind)
    ns = namespace_for(info, namespace)
    if grace_period is not None and grace_period == 0 and not force:
        raise CliError(FORCE_WARNING)
    if force:
        err(IMMEDIATE_WARNING)
        if grace_period is None:
            grace_period = 0
    for name in names:
        result = await api.delete(info.resource, name, ns, grace_period_seconds=grace_period)
        ref = f'{info.kind.lower()} "{name}"'
        if result["deleted"] and force:
            out(f"{ref} force deleted")
        else:
            out(f"{ref} deleted")
        if wait and not result["deleted"]:
            await _wait_gone(api, info, name, ns, result["object"]["metadata"]["uid"])


async def _wait_gone(api: ApiClient, info: KindInfo, name: str, ns: str | None,
                     uid: str) -> None:
    while True:
        try:
            obj = await api.get(info.resource, name, ns)
        except ApiError as e:
            if e.reason == Reason.NOT_FOUND:
                return
            raise
        if obj["metadata"].get("uid") != uid:
            return
        await asyncio.sleep(0.5)


# -- history -----------------------------------------------------------------------------


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for k, v in value.items():
            flat.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return flat or {prefix: {}}
    if isinstance(value, list) and value:
        flat = {}
        for i, v in enumerate(value):
            flat.update(_flatten(v, f"{prefix}[{i}]"))
        return flat
    return {prefix: value}


def changes(old: Obj | None, new: Obj | None) -> list[str]:
    """What changed between two versions, as `path: old → new` lines."""
    skip = ("metadata.resourceVersion", "metadata.managedFields")
    a = _flatten(old or {})
    b = _flatten(new or {})
    out = []
    for path in sorted(set(a) | set(b)):
        if path.startswith(skip) or a.get(path) == b.get(path):
            continue
        if path not in a:
            out.append(f"+ {path}: {json.dumps(b[path])}")
        elif path not in b:
            out.append(f"- {path}: {json.dumps(a[path])}")
        else:
            out.append(f"~ {path}: {json.dumps(a[path])} → {json.dumps(b[path])}")
    return out


async def history(api: ApiClient, kind: str, name: str, *, namespace: str | None,
                  out: Out) -> None:
    info = kind_of(kind)
    versions = await api.history(info.resource, name, namespace_for(info, namespace))
    if versions and versions[0]["type"] != "ADDED":
        # History walks back to the creation unless etcd compacted what came before.
        out(f"(older versions compacted before REVISION {versions[0]['revision']}: the "
            "apiserver keeps history for --etcd-compaction-interval, 5m by default)")
    previous: Obj | None = None
    for v in versions:
        out(f"REVISION {v['revision']}  {v['type']}")
        obj = v.get("object")
        if v["type"] == "ADDED":
            out("  (created)")
        elif v["type"] == "DELETED":
            out("  (deleted from etcd)")
        else:
            for line in changes(previous, obj) or ["(no field changes)"]:
                out(f"  {line}")
        previous = obj


# -- label -------------------------------------------------------------------------------


async def label(api: ApiClient, kind: str, name: str, pairs: list[str], *,
                namespace: str | None, overwrite: bool, out: Out) -> None:
    """As `kubectl label`: a concurrent write (a kubelet's heartbeat on a Node) never makes
    it fail; the change is made again on a fresh read (skiff.client.conflicts)."""
    info = kind_of(kind)

    async def relabel() -> None:
        obj = await api.get(info.resource, name, namespace_for(info, namespace))
        labels = dict(obj["metadata"].get("labels") or {})
        for pair in pairs:
            if pair.endswith("-") and "=" not in pair:
                labels.pop(pair[:-1], None)
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise CliError(f"invalid label spec {pair!r}: use key=value, or key- to "
                               "remove")
            if key in labels and labels[key] != value and not overwrite:
                raise CliError(f"'{key}' already has a value ({labels[key]}), and "
                               "--overwrite is false")
            labels[key] = value
        obj["metadata"]["labels"] = labels
        await api.update(obj)

    await retry_on_conflict(relabel)
    out(f"{info.kind.lower()}/{name} labeled")
