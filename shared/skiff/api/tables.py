"""Table columns like kubectl's, and the status words people look for (SPEC GT12, LC3).

Shared by the `skiff` CLI and the apiserver's server-side Table output for kubectl. Each
kind's columns are its API group's (`skiff.api.groups`); this module picks them and renders
rows. `pod_status` (kubectl's printPod) and `node_status` live with their kinds in
`skiff.api.groups.core` and are named here for the CLI.
"""

from __future__ import annotations

from skiff.api.catalog import COLUMNS, WIDE
from skiff.api.columns import Column, age, age_column, meta
from skiff.api.groups.core.cluster import node_status
from skiff.api.groups.core.pods import pod_ready, pod_status
from skiff.api.types import Obj

__all__ = ["COLUMNS", "DEFAULT_COLUMNS", "WIDE", "Column", "age", "columns_for",
           "node_status", "pod_ready", "pod_status", "render", "table"]

DEFAULT_COLUMNS: list[Column] = [("NAME", meta("name")), ("AGE", age_column)]


def columns_for(kind: str, *, wide: bool = False, namespace_column: bool = False
                ) -> list[Column]:
    cols = list(COLUMNS.get(kind, DEFAULT_COLUMNS))
    if kind == "Pod" and not wide:
        # NODE is what people watching partitions look for; kubectl needs -o wide for it.
        cols.append(("NODE", lambda o: str(o.get("spec", {}).get("nodeName") or "<none>")))
    if wide:
        cols += WIDE.get(kind, [])
    if namespace_column:
        cols.insert(0, ("NAMESPACE", meta("namespace")))
    return cols


def table(rows: list[list[str]], headers: list[str] | None = None) -> str:
    all_rows = ([headers] if headers else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
             for r in all_rows]
    return "\n".join(lines)


def render(objs: list[Obj], kind: str, *, wide: bool = False, namespace_column: bool = False,
           headers: bool = True) -> str:
    cols = columns_for(kind, wide=wide, namespace_column=namespace_column)
    rows = [[fn(o) for _, fn in cols] for o in objs]
    return table(rows, [name for name, _ in cols] if headers else None)
