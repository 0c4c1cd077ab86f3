"""One informer per resource, shared by every controller of the process.

Kubernetes' `SharedInformerFactory`: PodGC, node lifecycle, the ReplicaSet and StatefulSet
controllers and the disruption controller all read pods, but the process keeps a single
list + watch of them. Controllers ask for the informers they need while they are built
(registering their handlers), then `run()` starts every informer that was asked for.
"""

from __future__ import annotations

import asyncio

from skiff.api.types import Obj
from skiff.client import (
    BY_NAMESPACE,
    BY_NODE_NAME,
    Client,
    Informer,
    index_by_namespace,
    index_by_node_name,
)
from skiff.client.informer import IndexFunc

BY_CONTROLLER_UID = "controllerUID"
NODE_LEASE_NAMESPACE = "kube-node-lease"


def controller_ref(obj: Obj) -> Obj | None:
    """The ownerReference with `controller: true`, if any (`metav1.GetControllerOf`)."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def index_by_controller_uid(obj: Obj) -> list[str]:
    ref = controller_ref(obj)
    return [str(ref["uid"])] if ref and ref.get("uid") else []


class SharedInformers:
    """Lazily built informers keyed by (resource, namespace); `run()` runs them all."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._informers: dict[tuple[str, str | None], Informer] = {}
        self._started = False

    def _get(self, resource: str, namespace: str | None = None) -> Informer:
        key = (resource, namespace)
        informer = self._informers.get(key)
        if informer is None:
            if self._started:
                raise RuntimeError(f"informer for {resource} requested after start; "
                                   "controllers must ask for informers while being built")
            indexers: dict[str, IndexFunc] = {BY_NAMESPACE: index_by_namespace}
            if resource == "pods":
                indexers[BY_NODE_NAME] = index_by_node_name
                indexers[BY_CONTROLLER_UID] = index_by_controller_uid
            informer = Informer(self._client, resource, namespace=namespace,
                                indexers=indexers)
            self._informers[key] = informer
        return informer

    def resource(self, resource: str) -> Informer:
        """The informer of any resource (the garbage collector watches many)."""
        return self._get(resource)

    def pods(self) -> Informer:
        return self._get("pods")

    def nodes(self) -> Informer:
        return self._get("nodes")

    def node_leases(self) -> Informer:
        return self._get("leases", NODE_LEASE_NAMESPACE)

    def replica_sets(self) -> Informer:
        return self._get("replicasets")

    def stateful_sets(self) -> Informer:
        return self._get("statefulsets")

    def pod_disruption_budgets(self) -> Informer:
        return self._get("poddisruptionbudgets")

    def persistent_volume_claims(self) -> Informer:
        return self._get("persistentvolumeclaims")

    def volume_attachments(self) -> Informer:
        return self._get("volumeattachments")

    def fences(self) -> Informer:
        return self._get("fences")

    def namespaces(self) -> Informer:
        return self._get("namespaces")

    def service_accounts(self) -> Informer:
        return self._get("serviceaccounts")

    def persistent_volumes(self) -> Informer:
        return self._get("persistentvolumes")

    def storage_classes(self) -> Informer:
        return self._get("storageclasses")

    async def run(self) -> None:
        """Run every informer asked for so far, until cancelled."""
        self._started = True
        async with asyncio.TaskGroup() as tg:
            for (resource, namespace), informer in self._informers.items():
                tg.create_task(informer.run(), name=f"informer:{resource}:{namespace or ''}")

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))
