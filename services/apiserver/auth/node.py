"""The Node authorizer (SPEC AU2): what a kubelet (`system:node:<name>`) may read and write,
decided from the graph of its pods and what they reference, as Kubernetes' node
authorizer does. Any other user gets no opinion from it.
"""

from __future__ import annotations

from typing import Protocol

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.auth import READ_VERBS, Attributes, AuthorizationResult, Decision, node_identity


class ObjectReader(Protocol):
    """What the Node authorizer reads of the registry: objects and field-selected lists."""

    async def get(self, resource: str, namespace: str | None, name: str, *,
                  revision: int = 0) -> Obj: ...

    async def list(self, resource: str, namespace: str | None, *, label_selector: str = "",
                   field_selector: str = "") -> Obj: ...


NODE_LEASE_NAMESPACE = "kube-node-lease"


_NODE_READABLE = frozenset({"nodes", "pods", "leases", "volumeattachments", "fences",
                            "namespaces", "services", "endpoints", "priorityclasses",
                            "events", "csinodes", "storageclasses",
                            "endpointslices"})  # the service proxy (kube-proxy's reads)
_NODE_REFERENCED = frozenset({"persistentvolumeclaims", "configmaps", "secrets",
                              "persistentvolumes"})


def _pod_references(pod: Obj, resource: str, name: str) -> bool:
    spec = pod.get("spec") or {}
    if resource in ("configmaps", "secrets") and name in _env_references(spec, resource):
        return True  # env valueFrom / envFrom, as in the node authorizer's graph
    for volume in spec.get("volumes") or ():
        for source in ((volume.get("projected") or {}).get("sources") or ()):
            if resource == "configmaps" and (source.get("configMap") or {}).get(
                    "name") == name:
                return True
            if resource == "secrets" and (source.get("secret") or {}).get("name") == name:
                return True
        if resource == "persistentvolumeclaims" and (
                (volume.get("persistentVolumeClaim") or {}).get("claimName") == name):
            return True
        if resource == "configmaps" and (volume.get("configMap") or {}).get("name") == name:
            return True
        if resource == "secrets" and (volume.get("secret") or {}).get("secretName") == name:
            return True
    return False


def _env_references(spec: Obj, resource: str) -> set[str]:
    """The ConfigMaps or Secrets a pod's containers read into their environment."""
    key_ref, from_ref = (("configMapKeyRef", "configMapRef") if resource == "configmaps"
                         else ("secretKeyRef", "secretRef"))
    names: set[str] = set()
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get(key_ref) or {}
            if ref.get("name"):
                names.add(str(ref["name"]))
        for source in container.get("envFrom") or ():
            ref = source.get(from_ref) or {}
            if ref.get("name"):
                names.add(str(ref["name"]))
    return names


class NodeAuthorizer:
    """Kubernetes' Node authorizer, by lookup instead of a graph: a kubelet
    (`system:node:<name>` in `system:nodes`) reads what its pods need and writes its own
    Node, its own Lease, its pods' status and their deletion, and events."""

    def __init__(self, registry: ObjectReader) -> None:
        self.registry = registry

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        node = node_identity(attrs.user)
        if node is None or not attrs.is_resource_request:
            return AuthorizationResult(Decision.NO_OPINION)
        r, verb = attrs.resource, attrs.verb
        if r in _NODE_REFERENCED:
            if verb == "get" and await self._referenced(node, attrs):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"no relationship found between node '{node}' and this object")
        if verb in READ_VERBS:
            return AuthorizationResult(
                Decision.ALLOW if r in _NODE_READABLE else Decision.NO_OPINION)
        if r == "nodes":
            if verb == "create" or (verb in ("update", "patch", "delete")
                                    and attrs.name == node):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' cannot modify node '{attrs.name}'")
        if r == "leases" and attrs.api_group == "coordination.k8s.io":
            if attrs.namespace == NODE_LEASE_NAMESPACE and (
                    verb == "create" or attrs.name == node):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' can only modify its own Lease "
                         f"'{NODE_LEASE_NAMESPACE}/{node}'")
        if r == "events" and verb in ("create", "update", "patch"):
            return AuthorizationResult(Decision.ALLOW)
        if r == "serviceaccounts" and attrs.subresource == "token" and verb == "create":
            # the projected token of a pod bound here (Kubernetes' node authorizer graph)
            if await self._runs_service_account(node, attrs.namespace, attrs.name):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"no relationship found between node '{node}' and this object")
        if r == "pods" and ((attrs.subresource == "status" and verb in ("update", "patch"))
                            or (attrs.subresource == "" and verb == "delete")):
            if await self._bound_here(node, attrs.namespace, attrs.name):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' can only {verb} pods bound to it")
        return AuthorizationResult(Decision.NO_OPINION)

    async def _bound_here(self, node: str, namespace: str, name: str) -> bool:
        try:
            pod = await self.registry.get("pods", namespace, name)
        except ApiError:
            return False
        return bool((pod.get("spec") or {}).get("nodeName") == node)

    async def _pods_here(self, node: str, namespace: str | None) -> list[Obj]:
        pods = await self.registry.list("pods", namespace,
                                        field_selector=f"spec.nodeName={node}")
        return list(pods["items"])

    async def _referenced(self, node: str, attrs: Attributes) -> bool:
        if attrs.resource == "persistentvolumes":  # pod -> claim -> volume
            return await self._volume_of_a_claim_here(node, attrs.name)
        if not attrs.namespace:
            return False
        pods = await self._pods_here(node, attrs.namespace)
        return any(_pod_references(p, attrs.resource, attrs.name) for p in pods)

    async def _volume_of_a_claim_here(self, node: str, volume: str) -> bool:
        for pod in await self._pods_here(node, None):
            namespace = pod["metadata"].get("namespace")
            for v in (pod.get("spec") or {}).get("volumes") or ():
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if not claim:
                    continue
                try:
                    pvc = await self.registry.get("persistentvolumeclaims", namespace, claim)
                except ApiError:
                    continue
                if (pvc.get("spec") or {}).get("volumeName") == volume:
                    return True
        return False

    async def _runs_service_account(self, node: str, namespace: str, name: str) -> bool:
        return any((p.get("spec") or {}).get("serviceAccountName", "default") == name
                   for p in await self._pods_here(node, namespace))


def _deny(reason: str) -> AuthorizationResult:
    return AuthorizationResult(Decision.DENY, reason)
