"""Kubernetes' defaulting (`pkg/apis/*/v1/defaults.go`) for the kinds Skiff serves.

The apiserver applies defaults to a fresh copy of every incoming object before it
validates and stores it, so what is read back is what Kubernetes would have stored
(`restartPolicy: Always`, probe `periodSeconds: 10`, ...). Like Kubernetes, a field that
is missing or holds the zero value gets the default. Each kind's defaulter is its API
group's (`skiff.api.groups`); this module picks it.
"""

from __future__ import annotations

from typing import Any

from skiff.api.catalog import DEFAULTERS, INITIAL_STATUS
from skiff.api.types import Obj


def apply_defaults(obj: Obj) -> None:
    """Fill in Kubernetes' defaults in place; the caller passes a copy it owns."""
    kind = obj.get("kind")
    defaulter = DEFAULTERS.get(kind) if isinstance(kind, str) else None
    if defaulter is not None:
        defaulter(obj)


def initial_status(kind: str) -> dict[str, Any] | None:
    """The status a `kind` is created with (whatever the client sent: its strategy's
    PrepareForCreate), or None when the client's status is kept or dropped by other rules."""
    status = INITIAL_STATUS.get(kind)
    return dict(status) if status is not None else None
