"""DefaultStorageClass admission (SPEC AX4), as Kubernetes' plugin of that name: a
PersistentVolumeClaim created without `storageClassName` gets the default StorageClass
(annotation `storageclass.kubernetes.io/is-default-class: "true"`; with several, the
newest). An explicit `""` asks for no class and is left alone. Claims created while there
is no default class get one later from the PersistentVolume controller (retroactive
assignment).
"""

from __future__ import annotations

from skiff.api import lookup
from skiff.api.groups.storage import is_default_class
from skiff.api.kinds import storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, DefaultingPlugin
from skiff.apiserver.storage.interface import Storage


def admit_default_storage_class(claim: Obj, classes: list[Obj]) -> None:
    spec = claim.setdefault("spec", {})
    if spec.get("storageClassName") is not None:
        return
    defaults = sorted((c for c in classes if is_default_class(c)),
                      key=lambda c: (str(c["metadata"].get("creationTimestamp", "")),
                                     str(c["metadata"]["name"])))
    if defaults:
        spec["storageClassName"] = defaults[-1]["metadata"]["name"]


class DefaultStorageClass(DefaultingPlugin):
    """Gives a created claim without a class the default StorageClass."""

    name = "DefaultStorageClass"
    kinds = frozenset({"PersistentVolumeClaim"})

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def admit_create(self, attrs: Attributes) -> None:
        classes, _ = await self.storage.list(storage_prefix(lookup("storageclasses")))
        admit_default_storage_class(attrs.obj, [kv.obj for kv in classes if kv.obj])
