"""Pods' strategy (`pkg/registry/core/pod/strategy.go`): the kubelet owns the status, so a
client's is dropped on create; `ephemeralcontainers` is a subresource written through the
pod itself (`kubectl debug`), validated on its own; and a DELETE is graceful: the pod is
marked with its grace period first, and a second DELETE may only shorten it (GT1–GT3).
"""

from __future__ import annotations

from typing import ClassVar

from skiff.api.errors import FieldError
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.api.validation import validate_ephemeral_containers_update
from skiff.apiserver.registry import graceful
from skiff.apiserver.registry.strategy import OBJECT_SUBRESOURCES, Strategy

# the Pod subresource `kubectl debug` writes: only spec.ephemeralContainers changes
EPHEMERAL_CONTAINERS = "ephemeralcontainers"


class PodStrategy(Strategy):
    """Pods."""

    reset_status_on_create = True
    object_subresources: ClassVar[frozenset[str]] = OBJECT_SUBRESOURCES | {
        EPHEMERAL_CONTAINERS}

    def merge_subresource(self, old: Obj, new: Obj, subresource: str) -> Obj:
        """An `ephemeralcontainers` write changes only `spec.ephemeralContainers`."""
        if subresource != EPHEMERAL_CONTAINERS:
            return super().merge_subresource(old, new, subresource)
        merged = deep_copy(old)
        merged.setdefault("spec", {})["ephemeralContainers"] = deep_copy(
            (new.get("spec") or {}).get("ephemeralContainers") or [])
        return merged

    def validate_update(self, new: Obj, old: Obj, *, subresource: str) -> list[FieldError]:
        if subresource == EPHEMERAL_CONTAINERS:
            return validate_ephemeral_containers_update(new, old)
        return super().validate_update(new, old, subresource=subresource)

    def delete_grace_period(self, current: Obj, requested: int | None) -> int | None:
        if current["metadata"].get("deletionTimestamp"):
            return graceful.later_delete_period(requested)
        return graceful.pod_grace_period(current, requested)
