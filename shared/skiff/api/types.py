"""The one spelling of an API object in Python: a Kubernetes-shaped JSON dict (SPEC AS1).

Objects travel as dicts from etcd through the apiserver, the gRPC codec and the client to
every controller, so a single alias keeps signatures readable and lets a later typed model
replace it in one place. `ObjView` is the read-only form for functions that must not
modify what they are given (watch-cache objects are shared by every watcher)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

Obj: TypeAlias = dict[str, Any]
ObjView: TypeAlias = Mapping[str, Any]
