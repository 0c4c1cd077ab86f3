"""Small object makers for integration tests (real Kubernetes manifests as dicts)."""

from __future__ import annotations

from typing import Any

from skiff.api.types import Obj


def pod(name: str, namespace: str, *, node: str | None = None, grace: int | None = None,
        priority_class: str | None = None, labels: dict[str, str] | None = None,
        command: list[str] | None = None, **spec: Any) -> Obj:
    body: Obj = {"containers": [{"name": "main", "image": "busybox",
                                 "command": command or ["sleep", "3600"]}], **spec}
    if node:
        body["nodeName"] = node
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    if priority_class:
        body["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": body}


def priority_class(name: str, value: int, *, global_default: bool = False,
                   policy: str | None = None) -> Obj:
    obj: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "globalDefault": global_default}
    if policy:
        obj["preemptionPolicy"] = policy
    return obj


def pdb(name: str, namespace: str, selector: dict[str, str], *, min_available: int) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}}}
