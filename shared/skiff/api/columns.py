"""Table-column primitives: kubectl's printers are built from these (SPEC GT12).

A column is `(HEADER, function of the object)`; each API group declares its kinds' columns
with them and `skiff.api.tables` picks a kind's list. `age` is kubectl's HumanDuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skiff.api.types import Obj
from skiff.clock import parse_rfc3339

Column = tuple[str, Callable[[Obj], str]]


def age(timestamp: str | None, *, now: float | None = None) -> str:
    """kubectl's HumanDuration: 5s, 2m3s, 10m, 3h4m, 5d."""
    if not timestamp:
        return "<unknown>"
    seconds = int((now or time.time()) - parse_rfc3339(timestamp))
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def condition(obj: Obj, type_: str) -> Obj | None:
    """The status condition of `type_`, or None."""
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def meta(field: str) -> Callable[[Obj], str]:
    """The column of one `metadata` field."""
    return lambda o: str(o.get("metadata", {}).get(field, ""))


def age_column(o: Obj) -> str:
    """The AGE column: time since `metadata.creationTimestamp`."""
    return age(o.get("metadata", {}).get("creationTimestamp"))


def spec_of(o: Obj) -> Obj:
    return dict(o.get("spec") or {})


def status_of(o: Obj) -> Obj:
    return dict(o.get("status") or {})


def selector_text(selector: Any) -> str:
    if not isinstance(selector, dict) or not selector:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))



def template_containers(o: Obj, field: str) -> str:
    template = (spec_of(o).get("template") or {}).get("spec") or {}
    return ",".join(str(c.get(field, "")) for c in template.get("containers") or [])


def label_selector_text(selector: Any) -> str:
    """metav1.FormatLabelSelector: `a=b,c in (d,e),!f`; `<none>` when it selects nothing."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for req in selector.get("matchExpressions") or []:
        key, op = req.get("key", ""), req.get("operator", "")
        values = ",".join(sorted(req.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}.get(op, key))
    return ",".join(parts) or "<none>"



# ReplicaSets and ReplicationControllers (kubectl's printReplicaSet/printReplicationController)
REPLICA_COLUMNS: list[Column] = [
    ("NAME", meta("name")),
    ("DESIRED", lambda o: str(o.get("spec", {}).get("replicas", 0))),
    ("CURRENT", lambda o: str(o.get("status", {}).get("replicas", 0))),
    ("READY", lambda o: str(o.get("status", {}).get("readyReplicas", 0))),
    ("AGE", age_column)]
