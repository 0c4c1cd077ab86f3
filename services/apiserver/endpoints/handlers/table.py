"""Server-side Table output (`Accept: application/json;as=Table`), as kubectl asks for it:
the same columns `skiff get` prints, and `includeObject` for each row.
"""

from __future__ import annotations

from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.endpoints.handlers import versions
from skiff.apiserver.endpoints.handlers.request import include_object
from skiff.apiserver.endpoints.http import Request
from skiff.apiserver.registry.strategy import Strategy


def maybe_table(req: Request, info: KindInfo, strategy: Strategy, items: list[Obj],
                whole: Obj) -> Obj:
    """`whole` as asked: as it is, or (`Accept: ...;as=Table`) as a Table of `items`
    with the columns of the kind's strategy (those `skiff get` prints)."""
    if "as=Table" not in req.header("accept"):
        return whole
    include = include_object(req.query)
    cols = strategy.columns(wide=True)
    # kubectl's own columns; the NODE the skiff CLI adds to pods is -o wide here
    narrow = strategy.kubectl_columns()
    rows = []
    for obj in items:
        shown = versions.stored_form(info, obj)  # the columns read the stored version
        row: Obj = {"cells": [fn(shown) for _, fn in cols], "object": None}
        if include == "Object":  # kubectl --sort-by asks for it: it sorts by any field
            row["object"] = {"apiVersion": info.api_version, "kind": info.kind, **obj}
        elif include == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata",
                             "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "", **{  # a page's continue token too
                k: v for k, v in whole.get("metadata", {}).items()
                if k in ("resourceVersion", "continue", "remainingItemCount")}},
            "columnDefinitions": [
                {"name": name.title() if name != "NAME" else "Name", "type": "string",
                 "format": "name" if name == "NAME" else "", "description": name,
                 "priority": 0 if name in narrow else 1}
                for name, _ in cols],
            "rows": rows}
