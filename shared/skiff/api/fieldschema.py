"""The schema language of the known fields of each kind, for `fieldValidation` (SPEC AS1).

Kubernetes drops fields its OpenAPI schema does not know and warns about each one. A schema
here is the set of real Kubernetes field names of an object, nested where Skiff reads the
structure, and `ANY` for open-ended sub-trees (labels, resources, affinity, ...). Each API
group declares its kinds' schemas with these blocks; `skiff.api.schema` prunes with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class _AnyType:
    """Marks a sub-tree whose content is not checked."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _AnyType()


@dataclass(frozen=True)
class ListOf:
    item: Field


Field = Union[_AnyType, "Fields", ListOf]
Fields = dict[str, Field]


def fields(*names: str, **nested: Field) -> Fields:
    """A schema object: `names` are leaves (or open sub-trees), `nested` have structure."""
    result: Fields = dict.fromkeys(names, ANY)
    result.update(nested)
    return result


OWNER_REFERENCE = fields("apiVersion", "kind", "name", "uid", "controller",
                         "blockOwnerDeletion")
OBJECT_META = fields(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "finalizers", "managedFields", "clusterName",
    ownerReferences=ListOf(OWNER_REFERENCE),
)
LABEL_SELECTOR = fields(
    "matchLabels", matchExpressions=ListOf(fields("key", "operator", "values")))


CONDITION = fields("type", "status", "lastProbeTime", "lastHeartbeatTime",
                   "lastTransitionTime", "lastUpdateTime", "reason", "message",
                   "observedGeneration")

TOP = ("apiVersion", "kind")
CONDITIONS = ListOf(CONDITION)
