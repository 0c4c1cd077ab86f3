"""Admission in the apiserver: what Kubernetes' admission plugins do to a pod at create.

- Priority (SPEC PP1–PP2): `priorityClassName` resolves to `spec.priority` and
  `spec.preemptionPolicy`; an unknown class is refused; no name takes the globalDefault's.
- DefaultTolerationSeconds (SPEC PS2): NoExecute tolerations for `not-ready` and
  `unreachable` (300 s, configurable) unless the pod already tolerates them.
- PriorityClass rules: at most one globalDefault; built-in system classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiff.api.errors import ApiError, Reason, forbidden

Obj = dict[str, Any]

SYSTEM_CLASSES: dict[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


@dataclass(frozen=True)
class AdmissionConfig:
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300


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


def admit_default_tolerations(pod: Obj, config: AdmissionConfig) -> None:
    """PS2: add the NoExecute tolerations for not-ready / unreachable nodes."""
    tolerations: list[Obj] = pod.setdefault("spec", {}).setdefault("tolerations", [])

    def tolerates(key: str) -> bool:
        # As Kubernetes' DefaultTolerationSeconds: a toleration of this key (or of every
        # key: empty key) for NoExecute (or every effect: empty effect) already covers it.
        return any(
            t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None)
            for t in tolerations
        )

    for key, seconds in ((NOT_READY_TAINT, config.default_not_ready_toleration_seconds),
                         (UNREACHABLE_TAINT, config.default_unreachable_toleration_seconds)):
        if not tolerates(key):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": seconds})


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
