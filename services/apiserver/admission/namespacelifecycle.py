"""NamespaceLifecycle admission, as Kubernetes' plugin of that name: nothing is created in a
namespace that does not exist or is being terminated. The namespace is read from the
watch-fed lookup, with a live read on a miss (one created a moment ago is found).
"""

from __future__ import annotations

from skiff.api import ApiError, Reason
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.storage.lookups import Lookup


class NamespaceLifecycle(Plugin):
    """Refuses a create in a missing or terminating namespace."""

    name = "NamespaceLifecycle"

    def __init__(self, namespaces: Lookup) -> None:
        self.namespaces = namespaces

    async def admit(self, attrs: Attributes) -> list[str]:
        if attrs.operation is Operation.CREATE and attrs.info.namespaced:
            await self.check_active(attrs.obj["metadata"]["namespace"])
        return []

    async def check_active(self, namespace: str) -> None:
        """NotFound when `namespace` is missing, Forbidden while it terminates."""
        ns = await self.namespaces.get(namespace)
        if ns is None:
            raise ApiError(Reason.NOT_FOUND, f'namespaces "{namespace}" not found; '
                           f"create it first (skiff apply a Namespace)")
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError.forbidden("namespaces", namespace,
                                     "unable to create new content in namespace "
                                     f"{namespace} because it is being terminated")
