"""Priority admission (SPEC PP1–PP2), as Kubernetes' plugin of that name.

- A created pod's `priorityClassName` resolves to `spec.priority` and
  `spec.preemptionPolicy`; an unknown class is refused; no name takes the globalDefault's.
- A created PriorityClass: at most one globalDefault; `system-` names are reserved for
  the built-in system classes (which the apiserver creates at start).
"""

from __future__ import annotations

from skiff.api import lookup
from skiff.api.errors import ApiError, Reason, forbidden, invalid
from skiff.api.kinds import storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup

SYSTEM_CLASSES: dict[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


def builtin_priority_classes() -> list[Obj]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value, "globalDefault": False,
         "preemptionPolicy": "PreemptLowerPriority",
         "description": "Used for system critical pods that must run in the cluster, "
                        "but can be moved to another node if necessary."
         if name == "system-cluster-critical" else
         "Used for system critical pods that must not be moved from their current node."}
        for name, value in SYSTEM_CLASSES.items()
    ]


def admit_priority(pod: Obj, classes: list[Obj]) -> None:
    """PP2: resolve the class into spec.priority (and preemptionPolicy) at create."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName")
    chosen: Obj | None = None
    if name:
        chosen = next((c for c in classes if c["metadata"]["name"] == name), None)
        if chosen is None:
            raise ApiError(Reason.FORBIDDEN,
                           f'pods "{pod["metadata"].get("name", "")}" is forbidden: '
                           f"no PriorityClass with name {name} was found")
    else:
        chosen = next((c for c in classes if c.get("globalDefault")), None)
    value = int(chosen["value"]) if chosen else 0
    if "priority" in spec and spec["priority"] is not None and spec["priority"] != value:
        raise ApiError.invalid("Pod", pod["metadata"].get("name", ""), [forbidden(
            "spec.priority",
            "the integer value of priority must not be provided in pod spec; priority "
            f"admission controller computed {value} from the given PriorityClass name")])
    spec["priority"] = value
    # The class's policy (PreemptLowerPriority without a class); a pod may repeat it but not
    # contradict it (Kubernetes' priority admission forbids that).
    policy = str((chosen or {}).get("preemptionPolicy") or "PreemptLowerPriority")
    asked = spec.get("preemptionPolicy")
    if asked is not None and asked != policy:
        raise ApiError(Reason.FORBIDDEN,
                       f'pods "{pod["metadata"].get("name", "")}" is forbidden: the string '
                       f"value of PreemptionPolicy ({asked}) must not be provided in pod "
                       f"spec; priority admission controller computed {policy} from the "
                       "given PriorityClass name")
    if chosen is not None:
        spec["priorityClassName"] = chosen["metadata"]["name"]
    spec["preemptionPolicy"] = policy


def admit_priority_class(pc: Obj, existing: list[Obj]) -> None:
    """PP1: at most one globalDefault; system- names are reserved."""
    name = pc["metadata"]["name"]
    if pc.get("globalDefault"):
        other = next((c for c in existing if c.get("globalDefault")
                      and c["metadata"]["name"] != name), None)
        if other is not None:
            raise ApiError.invalid("PriorityClass", name, [forbidden(
                "globalDefault",
                f"PriorityClass {other['metadata']['name']} is already marked as default. "
                "Only one default can exist")])


class Priority(Plugin):
    """Resolves a created pod's class (`admit`) and checks a created PriorityClass
    (`validate`)."""

    name = "Priority"

    def __init__(self, classes: Lookup, storage: Storage) -> None:
        self.classes = classes
        self.storage = storage

    async def admit(self, attrs: Attributes) -> list[str]:
        if attrs.operation is not Operation.CREATE or attrs.info.kind != "Pod":
            return []
        obj = attrs.obj
        classes = await self.classes.values()
        wanted = obj.get("spec", {}).get("priorityClassName")
        if wanted and not any(c["metadata"]["name"] == wanted for c in classes):
            fresh = await self.classes.get(wanted)  # created a moment ago?
            classes = [*classes, fresh] if fresh else classes
        admit_priority(obj, classes)
        return []

    async def validate(self, attrs: Attributes) -> list[str]:
        if attrs.operation is not Operation.CREATE or attrs.info.kind != "PriorityClass":
            return []
        name = attrs.obj["metadata"]["name"]
        if name.startswith("system-") and name not in SYSTEM_CLASSES:
            raise ApiError.invalid("PriorityClass", name, [invalid(
                "metadata.name", name,
                "priority class names with 'system-' prefix are reserved")])
        existing, _ = await self.storage.list(storage_prefix(lookup("priorityclasses")))
        admit_priority_class(attrs.obj, [kv.obj for kv in existing if kv.obj])
        return []
