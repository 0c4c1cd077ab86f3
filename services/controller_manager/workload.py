"""What the ReplicaSet and StatefulSet controllers share: owner references, pods from a
template, and mapping a pod back to the controller that owns it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import Client
from skiff.controller_manager.informers import controller_ref


def owner_reference(owner: Mapping[str, Any]) -> Obj:
    """The ownerReference a controller puts on what it creates (`controller: true`)."""
    meta = owner["metadata"]
    return {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": owner["kind"],
            "name": meta["name"], "uid": meta["uid"], "controller": True,
            "blockOwnerDeletion": True}


def pod_from_template(owner: Mapping[str, Any]) -> Obj:
    """A pod built from `owner.spec.template`, owned by `owner`; the caller names it."""
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": owner["metadata"].get("namespace"),
                 "labels": dict(tmeta.get("labels") or {}),
                 "ownerReferences": [owner_reference(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def owner_key(pod: Mapping[str, Any], kind: str) -> str | None:
    """`namespace/name` of the pod's controller when it is of `kind`."""
    ref = controller_ref(dict(pod))
    if ref is None or ref.get("kind") != kind:
        return None
    return f"{pod['metadata'].get('namespace')}/{ref['name']}"


def owned_pods(pods: list[Obj], owner: Mapping[str, Any]) -> list[Obj]:
    """Pods whose controller reference is this very object (same UID, same namespace)."""
    ns = owner["metadata"].get("namespace")
    return [p for p in pods if p["metadata"].get("namespace") == ns]


async def write_status_if_changed(client: Client, owner: Mapping[str, Any],
                                  status: Obj) -> None:
    """Merge `status` into the workload's status and write it, unless nothing changed or the
    object is already gone (ReplicaSet and StatefulSet status alike). A value of None
    removes that field."""
    current = owner.get("status") or {}
    if all(current.get(k) == v for k, v in status.items()):
        return
    updated = copy.deepcopy(dict(owner))
    merged = {**current, **status}
    updated["status"] = {k: v for k, v in merged.items() if v is not None}
    try:
        await client.update_status(updated)
    except ApiError as err:
        if err.reason != Reason.NOT_FOUND:
            raise
