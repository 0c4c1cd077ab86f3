"""NodeRestriction admission (SPEC AU3): a kubelet may write only its own Node (and not the
labels that steer workloads to it), its own Lease and the pods bound to it, as Kubernetes'
NodeRestriction plugin allows. It needs the object, so it runs in admission, where the
registry knows it, not in the authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable

from skiff.api import ApiError
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.api.wellknown import (
    LABEL_ARCH,
    LABEL_HOSTNAME,
    LABEL_OS,
    LABEL_REGION,
    LABEL_REGION_BETA,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
)
from skiff.apiserver.admission.interface import Attributes, Plugin
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.auth.node import NODE_LEASE_NAMESPACE
from skiff.auth import node_identity

_NODE_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_NODE_LABELS_ALLOWED = frozenset({
    LABEL_HOSTNAME, LABEL_ARCH, LABEL_OS,
    "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", LABEL_REGION_BETA, LABEL_ZONE_BETA, LABEL_REGION,
    LABEL_ZONE})
_NODE_LABEL_PREFIXES_ALLOWED = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def _restricted_label(key: str) -> bool:
    """Labels a kubelet may not set on itself (NodeRestriction's rules)."""
    domain = key.partition("/")[0] if "/" in key else ""
    if domain == "node-restriction.kubernetes.io" or domain.endswith(
            ".node-restriction.kubernetes.io"):
        return True
    if key in _NODE_LABELS_ALLOWED or key.startswith(_NODE_LABEL_PREFIXES_ALLOWED):
        return False
    return any(domain == d or domain.endswith("." + d) for d in _NODE_LABEL_DOMAINS)


def _changed_labels(new: Obj, old: Obj | None) -> Iterable[str]:
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    for key in set(new_labels) | set(old_labels):
        if new_labels.get(key) != old_labels.get(key):
            yield key


def node_restriction(info: KindInfo, obj: Obj, old: Obj | None) -> None:
    """Kubernetes' NodeRestriction for the current user if it is a kubelet: its own Node
    and Lease only, no own taint changes, no restricted labels, no pods of its own."""
    user = current_user.get()
    node = node_identity(user) if user is not None else None
    if user is None or node is None:
        return
    name = (obj.get("metadata") or {}).get("name", "")
    verb = "create" if old is None else "update"
    if info.kind == "Node":
        if name != node:
            raise _admission(info, name, f"node '{node}' is not allowed to modify node '{name}'")
        if old is not None and ((obj.get("spec") or {}).get("taints") or []) != (
                (old.get("spec") or {}).get("taints") or []):
            raise _admission(info, name, f"node '{node}' is not allowed to modify taints")
        restricted = sorted(k for k in _changed_labels(obj, old) if _restricted_label(k))
        if restricted:
            raise _admission(info, name, f"node '{node}' is not allowed to modify labels: "
                             f"{', '.join(restricted)}")
    elif info.kind == "Lease" and (obj.get("metadata") or {}).get(
            "namespace") == NODE_LEASE_NAMESPACE:
        if name != node:
            raise _admission(info, name, f"node '{node}' is not allowed to {verb} lease '{name}'")
    elif info.kind == "Pod":
        if old is None:
            raise _admission(info, name, f"node '{node}' is not allowed to create pods")
        if (obj.get("spec") or {}).get("nodeName") != node:
            raise _admission(info, name, f"node '{node}' can only update pods bound to it")


def _admission(info: KindInfo, name: str, message: str) -> ApiError:
    return ApiError.forbidden(info.resource, name, message, group=info.group)


class NodeRestriction(Plugin):
    """`node_restriction` on every create and update."""

    name = "NodeRestriction"

    async def admit(self, attrs: Attributes) -> list[str]:
        node_restriction(attrs.info, attrs.obj, attrs.old)
        return []
