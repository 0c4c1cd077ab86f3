"""Shared by the issue-20 tests (SPEC SC1/FN3): a one-replica StatefulSet pinned to a real
kubelet, whose pod writes to an RWO claim, and waits on its pod and its attachment."""

from __future__ import annotations

from skiff.api import get_condition
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.waiting import get_or_none, wait_for

# The controllers the scenario needs, the fencing controller left out.
CONTROLLERS = "statefulset,attachdetach,persistentvolume-binder"


def pinned_stateful_set(name: str, namespace: str, node: str) -> Obj:
    """One replica on `node` (spec.nodeName in the template: no scheduler needed) with a
    ReadWriteOnce claim template."""
    script = 'echo hello > data/hello; exec sleep 3600'
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "serviceName": name,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {
                         "metadata": {"labels": {"app": name}},
                         "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                                  "containers": [{
                                      "name": "main", "image": "busybox",
                                      "command": ["sh", "-c", script],
                                      "volumeMounts": [{"name": "data",
                                                        "mountPath": "/data"}]}]}},
                     "volumeClaimTemplates": [{
                         "metadata": {"name": "data"},
                         "spec": {"accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}}}]}}


def is_running_and_ready(pod: Obj | None) -> bool:
    return bool(pod) and pod is not None \
        and pod.get("status", {}).get("phase") == "Running" \
        and (get_condition(pod, "Ready") or {}).get("status") == "True"


async def wait_running_and_ready(api: ApiClient, namespace: str, name: str, *,
                                 timeout: float) -> Obj:
    async def check() -> Obj | None:
        pod = await get_or_none(api, "pods", name, namespace)
        return pod if is_running_and_ready(pod) else None
    result: Obj = await wait_for(check, timeout=timeout, what=f"pod {name} Running and Ready")
    return result


async def volume_of(api: ApiClient, namespace: str, claim: str) -> str:
    pvc = await api.get("persistentvolumeclaims", claim, namespace)
    return f"pvc-{pvc['metadata']['uid']}"


async def wait_attached(api: ApiClient, volume: str, node: str, *, timeout: float) -> Obj:
    async def check() -> Obj | None:
        va = await get_or_none(api, "volumeattachments", volume)
        if va and va["spec"]["nodeName"] == node and (va.get("status") or {}).get("attached"):
            return va
        return None
    result: Obj = await wait_for(check, timeout=timeout,
                                 what=f"volume {volume} attached to {node}")
    return result


async def wait_detached(api: ApiClient, volume: str, *, timeout: float) -> None:
    async def gone() -> bool:
        return await get_or_none(api, "volumeattachments", volume) is None
    await wait_for(gone, timeout=timeout, what=f"volume {volume} detached")
