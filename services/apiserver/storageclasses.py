"""DefaultStorageClass admission (SPEC AX4), as Kubernetes' plugin of that name: a
PersistentVolumeClaim created without `storageClassName` gets the default StorageClass
(annotation `storageclass.kubernetes.io/is-default-class: "true"`; with several, the
newest). An explicit `""` asks for no class and is left alone. Claims created while there
is no default class get one later from the PersistentVolume controller (retroactive
assignment).
"""

from __future__ import annotations

from typing import Any

from skiff.api.accountkinds import is_default_class

Obj = dict[str, Any]


def admit_default_storage_class(claim: Obj, classes: list[Obj]) -> None:
    spec = claim.setdefault("spec", {})
    if spec.get("storageClassName") is not None:
        return
    defaults = sorted((c for c in classes if is_default_class(c)),
                      key=lambda c: (str(c["metadata"].get("creationTimestamp", "")),
                                     str(c["metadata"]["name"])))
    if defaults:
        spec["storageClassName"] = defaults[-1]["metadata"]["name"]
