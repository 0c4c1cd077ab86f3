"""ReplicationControllers (core/v1): the selector and labels defaulted from the template,
the label-map selector validation, kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import (
    REPLICA_COLUMNS,
    selector_text,
    spec_of,
    template_containers,
)
from skiff.api.errors import FieldError
from skiff.api.fieldchecks import as_dict
from skiff.api.fielddefaults import child
from skiff.api.fieldschema import CONDITION, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.podtemplate import (
    POD_TEMPLATE,
    default_template,
    validate_workload_template,
)
from skiff.api.types import Obj, ObjView


def _default_replication_controller(obj: Obj) -> None:
    """SetDefaults_ReplicationController: the selector and the controller's own labels
    default to the template's labels, replicas to 1."""
    spec = child(obj, "spec")
    template = spec.get("template")
    labels = ((template.get("metadata") or {}).get("labels")
              if isinstance(template, dict) else None)
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = child(obj, "metadata")
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if isinstance(template, dict):
        default_template(obj)


def _validate_replication_controller(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """ValidateReplicationController: unlike a ReplicaSet's, its selector may change."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    return errors + validate_workload_template(spec, kind="ReplicationController")


RULES = GroupRules(
    defaulters={"ReplicationController": _default_replication_controller},
    validators={"ReplicationController": _validate_replication_controller},
    columns={"ReplicationController": REPLICA_COLUMNS},
    wide={
        "ReplicationController": [
            ("CONTAINERS", lambda o: template_containers(o, "name")),
            ("IMAGES", lambda o: template_containers(o, "image")),
            ("SELECTOR", lambda o: selector_text(spec_of(o).get("selector")))],
    },
    schemas={
        "ReplicationController": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("replicas", "minReadySeconds", "selector", template=POD_TEMPLATE),
            status=fields("replicas", "fullyLabeledReplicas", "readyReplicas",
                          "availableReplicas", "observedGeneration",
                          conditions=ListOf(CONDITION)),
        ),
    },
    initial_status={"ReplicationController": {"replicas": 0}},
)
