"""DefaultTolerationSeconds admission (SPEC PS2), as Kubernetes' plugin of that name: a
pod gets NoExecute tolerations for the `not-ready` and `unreachable` taints (300 s,
configurable) unless it already tolerates them, so the taint manager evicts it only after
that long.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.api.types import Obj
from skiff.api.wellknown import TAINT_NOT_READY, TAINT_UNREACHABLE
from skiff.apiserver.admission.interface import Attributes, DefaultingPlugin


@dataclass(frozen=True)
class AdmissionConfig:
    """The plugin's `--default-not-ready-toleration-seconds` and
    `--default-unreachable-toleration-seconds`."""

    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300


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

    for key, seconds in ((TAINT_NOT_READY, config.default_not_ready_toleration_seconds),
                         (TAINT_UNREACHABLE, config.default_unreachable_toleration_seconds)):
        if not tolerates(key):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": seconds})


class DefaultTolerationSeconds(DefaultingPlugin):
    """Adds the two tolerations to a created pod."""

    name = "DefaultTolerationSeconds"
    kinds = frozenset({"Pod"})

    def __init__(self, config: AdmissionConfig) -> None:
        self.config = config

    async def admit_create(self, attrs: Attributes) -> None:
        admit_default_tolerations(attrs.obj, self.config)
