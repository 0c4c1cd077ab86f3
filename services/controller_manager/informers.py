"""One informer per resource, shared by every controller of the process.

Kubernetes' `SharedInformerFactory`: PodGC, node lifecycle, the ReplicaSet and StatefulSet
controllers and the disruption controller all read pods, but the process keeps a single
list + watch of them. Controllers ask for the informers they need while they are built
(registering their handlers), then `run()` starts every informer that was asked for.
Custom resources come and go while the process runs (SPEC EX2): `custom_kinds()` follows
the CRDs, and `dynamic(resource)` / `release(resource)` start and stop an informer of a
kind that appeared after the start.
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
from skiff.client.customkinds import CustomKinds
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
        self._custom_kinds: CustomKinds | None = None
        self._dynamic: dict[str, Informer] = {}
        self._dynamic_tasks: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None

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

    def in_namespace(self, resource: str, namespace: str) -> Informer:
        """The informer of one namespace's objects (the bootstrap controllers watch only
        kube-system's Secrets and kube-public's ConfigMaps)."""
        return self._get(resource, namespace)

    def custom_kinds(self) -> CustomKinds:
        """The custom kinds served now (one CRD informer for the process; ask while being
        built, so the kinds are known before controllers start)."""
        if self._custom_kinds is None:
            self._custom_kinds = CustomKinds(self._get("customresourcedefinitions"))
        return self._custom_kinds

    def dynamic(self, resource: str) -> Informer:
        """An informer of a resource that may appear while the process runs (a custom
        resource): started now if the others run already. Each caller gets its own; stop it
        with `release`."""
        if resource in self._dynamic:
            raise RuntimeError(f"a dynamic informer for {resource} runs already")
        informer = Informer(self._client, resource,
                            indexers={BY_NAMESPACE: index_by_namespace})
        self._dynamic[resource] = informer
        if self._group is not None:
            self._start_dynamic(resource, informer, self._group)
        return informer

    def release(self, resource: str) -> None:
        """Stop the dynamic informer of `resource` (its kind is no longer served)."""
        self._dynamic.pop(resource, None)
        task = self._dynamic_tasks.pop(resource, None)
        if task is not None:
            task.cancel()

    def _start_dynamic(self, resource: str, informer: Informer,
                       group: asyncio.TaskGroup) -> None:
        run = informer.run()
        try:
            self._dynamic_tasks[resource] = group.create_task(
                run, name=f"informer:{resource}:dynamic")
        except RuntimeError:  # the group is shutting down: so is every controller
            run.close()
            self._dynamic.pop(resource, None)

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
        try:
            async with asyncio.TaskGroup() as tg:
                self._group = tg
                for (resource, namespace), informer in self._informers.items():
                    tg.create_task(informer.run(),
                                   name=f"informer:{resource}:{namespace or ''}")
                for resource, informer in list(self._dynamic.items()):
                    self._start_dynamic(resource, informer, tg)
        finally:
            self._group = None
            self._dynamic_tasks.clear()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))
