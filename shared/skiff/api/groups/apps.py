"""The apps/v1 group: Deployments, ReplicaSets, StatefulSets, DaemonSets and
ControllerRevisions — defaults (SetDefaults_*), validation (a selector over a pod template,
rollout strategies, the StatefulSet fields that may change), kubectl's columns and known
fields, and the status each is created with."""

from __future__ import annotations

from collections.abc import Mapping

from skiff.api.columns import (
    REPLICA_COLUMNS,
    age_column,
    label_selector_text,
    meta,
    selector_text,
    spec_of,
    status_of,
    template_containers,
)
from skiff.api.errors import FieldError, forbidden, invalid
from skiff.api.fieldchecks import (
    as_dict,
    enum_field,
    immutable,
    int_field,
    int_or_percent,
    str_field,
)
from skiff.api.fielddefaults import child, ensure_child, set_default, set_if_none, template_spec
from skiff.api.fieldschema import (
    CONDITION,
    CONDITIONS,
    LABEL_SELECTOR,
    OBJECT_META,
    TOP,
    ListOf,
    fields,
)
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.podtemplate import (
    POD_TEMPLATE,
    default_pod_spec,
    default_template,
    validate_workload_template,
)
from skiff.api.types import Obj, ObjView

# -- defaults ----------------------------------------------------------------------------


def _default_deployment(obj: Obj) -> None:
    spec = ensure_child(obj, "spec")
    set_if_none(spec, "replicas", 1)
    strategy = ensure_child(spec, "strategy")
    set_if_none(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = ensure_child(strategy, "rollingUpdate")
        set_if_none(rolling, "maxUnavailable", "25%")
        set_if_none(rolling, "maxSurge", "25%")
    set_if_none(spec, "revisionHistoryLimit", 10)
    set_if_none(spec, "progressDeadlineSeconds", 600)
    default_pod_spec(template_spec(obj))


def _default_daemon_set(obj: Obj) -> None:
    spec = ensure_child(obj, "spec")
    strategy = ensure_child(spec, "updateStrategy")
    set_if_none(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = ensure_child(strategy, "rollingUpdate")
        set_if_none(rolling, "maxUnavailable", 1)
        set_if_none(rolling, "maxSurge", 0)
    set_if_none(spec, "revisionHistoryLimit", 10)
    default_pod_spec(template_spec(obj))


def _default_replica_set(obj: Obj) -> None:
    spec = child(obj, "spec")
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    default_template(obj)


def _default_stateful_set(obj: Obj) -> None:
    spec = child(obj, "spec")
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    set_default(spec, "podManagementPolicy", "OrderedReady")
    strategy = child(spec, "updateStrategy")
    set_default(strategy, "type", "RollingUpdate")
    if strategy.get("type") == "RollingUpdate":
        rolling = child(strategy, "rollingUpdate")
        if rolling.get("partition") is None:
            rolling["partition"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    retention = child(spec, "persistentVolumeClaimRetentionPolicy")
    set_default(retention, "whenDeleted", "Retain")
    set_default(retention, "whenScaled", "Retain")
    default_template(obj)


# -- validation --------------------------------------------------------------------------


def _selector_unchanged(spec: ObjView, old: ObjView | None) -> list[FieldError]:
    """apps/v1 selectors are immutable once created."""
    if old is None:
        return []
    return immutable(spec.get("selector"), (old.get("spec") or {}).get("selector"),
                     "spec.selector")


def _validate_replica_set(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += validate_workload_template(spec)
    errors += _selector_unchanged(spec, old)
    return errors


STATEFULSET_UPDATABLE = ("replicas", "ordinals", "template", "updateStrategy",
                         "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy",
                         "minReadySeconds")


def _with_claim_volumes(spec: ObjView) -> ObjView:
    """The spec as its pods will be: each volumeClaimTemplate a volume of the template (the
    controller adds them), so a container may mount a claim template by name."""
    claims = spec.get("volumeClaimTemplates")
    template = spec.get("template")
    if not isinstance(claims, list) or not isinstance(template, Mapping) or \
            not isinstance(template.get("spec"), Mapping):
        return spec
    volumes = template["spec"].get("volumes")
    if volumes is not None and not isinstance(volumes, list):
        return spec
    have = {v.get("name") for v in volumes or [] if isinstance(v, Mapping)}
    extra = [{"name": name, "persistentVolumeClaim": {"claimName": name}}
             for c in claims if isinstance(c, Mapping)
             and isinstance(name := (c.get("metadata") or {}).get("name"), str)
             and name not in have]
    if not extra:
        return spec
    return {**spec, "template": {**template, "spec": {**template["spec"],
                                                      "volumes": [*(volumes or []), *extra]}}}


def _validate_stateful_set(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += validate_workload_template(_with_claim_volumes(spec))
    errors += str_field(spec, "serviceName", "spec.serviceName")
    errors += enum_field(spec, "podManagementPolicy", "spec.podManagementPolicy",
                         ["OrderedReady", "Parallel"])
    errors += int_field(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", minimum=0)
    strategy, errs = as_dict(spec.get("updateStrategy"), "spec.updateStrategy")
    errors += errs
    errors += enum_field(strategy, "type", "spec.updateStrategy.type",
                         ["RollingUpdate", "OnDelete"])
    rolling, errs = as_dict(strategy.get("rollingUpdate"), "spec.updateStrategy.rollingUpdate")
    errors += errs
    if strategy.get("type") == "OnDelete" and strategy.get("rollingUpdate") is not None:
        errors.append(invalid("spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                              "only allowed for updateStrategy 'RollingUpdate'"))
    errors += int_field(rolling, "partition", "spec.updateStrategy.rollingUpdate.partition",
                        minimum=0)
    if rolling.get("maxUnavailable") is not None:
        max_unavailable = rolling["maxUnavailable"]
        mpath = "spec.updateStrategy.rollingUpdate.maxUnavailable"
        errors += int_or_percent(max_unavailable, mpath)
        if max_unavailable in (0, "0%"):
            errors.append(invalid(mpath, max_unavailable, "must be greater than 0"))
    retention, errs = as_dict(spec.get("persistentVolumeClaimRetentionPolicy"),
                            "spec.persistentVolumeClaimRetentionPolicy")
    errors += errs
    for key in ("whenDeleted", "whenScaled"):
        errors += enum_field(retention, key, f"spec.persistentVolumeClaimRetentionPolicy.{key}",
                             ["Retain", "Delete"])
    ordinals, errs = as_dict(spec.get("ordinals"), "spec.ordinals")
    errors += errs
    errors += int_field(ordinals, "start", "spec.ordinals.start", minimum=0)
    if old is not None:
        old_spec, _ = as_dict(old.get("spec"), "spec")
        changed = sorted(k for k in set(spec) | set(old_spec)
                         if k not in STATEFULSET_UPDATABLE and spec.get(k) != old_spec.get(k))
        if changed:
            errors.append(forbidden(
                "spec", "updates to statefulset spec for fields other than 'replicas', "
                "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden; "
                "changed: " + ", ".join(f"spec.{k}" for k in changed)))
    return errors


def _validate_deployment(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += validate_workload_template(spec)
    errors += int_field(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit",
                        minimum=0)
    errors += int_field(spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds",
                        minimum=1)
    deadline, min_ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds")
    if isinstance(deadline, int) and isinstance(min_ready, int) and deadline <= min_ready:
        errors.append(invalid("spec.progressDeadlineSeconds", deadline,
                              "must be greater than minReadySeconds"))
    strategy, errs = as_dict(spec.get("strategy"), "spec.strategy")
    errors += errs
    errors += enum_field(strategy, "type", "spec.strategy.type",
                         ["Recreate", "RollingUpdate"])
    if strategy.get("type") == "Recreate" and strategy.get("rollingUpdate") is not None:
        errors.append(forbidden("spec.strategy.rollingUpdate",
                                           "may not be specified when strategy `type` is "
                                           "'Recreate'"))
    rolling, errs = as_dict(strategy.get("rollingUpdate"),
                                     "spec.strategy.rollingUpdate")
    errors += errs
    surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
    for key, value in (("maxSurge", surge), ("maxUnavailable", unavailable)):
        if value is not None:
            errors += int_or_percent(value, f"spec.strategy.rollingUpdate.{key}")
    if strategy.get("type") == "RollingUpdate" and surge in (0, "0%") and \
            unavailable in (0, "0%"):
        errors.append(invalid("spec.strategy.rollingUpdate.maxUnavailable", unavailable,
                              "may not be 0 when `maxSurge` is 0"))
    errors += _selector_unchanged(spec, old)
    return errors


def _validate_daemon_set(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += validate_workload_template(spec)
    strategy, errs = as_dict(spec.get("updateStrategy"), "spec.updateStrategy")
    errors += errs
    errors += enum_field(strategy, "type", "spec.updateStrategy.type",
                         ["RollingUpdate", "OnDelete"])
    errors += _selector_unchanged(spec, old)
    return errors


def _validate_controller_revision(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors = int_field(obj, "revision", "revision", minimum=0)
    if old is not None:
        errors += immutable(obj.get("data"), old.get("data"), "data")
    return errors


# -- columns -----------------------------------------------------------------------------


def _controller_of(o: Obj) -> str:
    for ref in o.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).partition("/")[0]
            return f"{ref.get('kind', '').lower()}.{group}/{ref.get('name')}"
    return "<none>"


RULES = GroupRules(
    defaulters={"Deployment": _default_deployment, "DaemonSet": _default_daemon_set,
                "ReplicaSet": _default_replica_set, "StatefulSet": _default_stateful_set},
    validators={"Deployment": _validate_deployment, "DaemonSet": _validate_daemon_set,
                "ReplicaSet": _validate_replica_set, "StatefulSet": _validate_stateful_set,
                "ControllerRevision": _validate_controller_revision},
    columns={
        "Deployment": [
            ("NAME", meta("name")),
            ("READY", lambda o: f"{status_of(o).get('readyReplicas', 0)}/"
                                f"{spec_of(o).get('replicas', 0)}"),
            ("UP-TO-DATE", lambda o: str(status_of(o).get("updatedReplicas", 0))),
            ("AVAILABLE", lambda o: str(status_of(o).get("availableReplicas", 0))),
            ("AGE", age_column)],
        "DaemonSet": [
            ("NAME", meta("name")),
            ("DESIRED", lambda o: str(status_of(o).get("desiredNumberScheduled", 0))),
            ("CURRENT", lambda o: str(status_of(o).get("currentNumberScheduled", 0))),
            ("READY", lambda o: str(status_of(o).get("numberReady", 0))),
            ("UP-TO-DATE", lambda o: str(status_of(o).get("updatedNumberScheduled", 0))),
            ("AVAILABLE", lambda o: str(status_of(o).get("numberAvailable", 0))),
            ("NODE SELECTOR", lambda o: selector_text(
                ((spec_of(o).get("template") or {}).get("spec") or {}).get("nodeSelector"))),
            ("AGE", age_column)],
        "ControllerRevision": [
            ("NAME", meta("name")), ("CONTROLLER", _controller_of),
            ("REVISION", lambda o: str(o.get("revision", 0))), ("AGE", age_column)],
        "ReplicaSet": REPLICA_COLUMNS,
        "StatefulSet": [("NAME", meta("name")),
                        ("READY", lambda o: f"{o.get('status', {}).get('readyReplicas', 0)}/"
                                            f"{o.get('spec', {}).get('replicas', 0)}"),
                        ("AGE", age_column)],
    },
    wide={
        "Deployment": [
            ("CONTAINERS", lambda o: ",".join(
                c.get("name", "") for c in ((spec_of(o).get("template") or {}).get("spec") or {})
                .get("containers") or [])),
            ("IMAGES", lambda o: ",".join(
                c.get("image", "") for c in ((spec_of(o).get("template") or {}).get("spec") or {})
                .get("containers") or [])),
            ("SELECTOR", lambda o: selector_text((spec_of(o).get("selector") or {}).get(
                "matchLabels")))],
        # kubectl 1.32's -o wide columns of the other workloads (printers.go)
        "ReplicaSet": [("CONTAINERS", lambda o: template_containers(o, "name")),
                       ("IMAGES", lambda o: template_containers(o, "image")),
                       ("SELECTOR", lambda o: label_selector_text(spec_of(o).get("selector")))],
        "StatefulSet": [("CONTAINERS", lambda o: template_containers(o, "name")),
                        ("IMAGES", lambda o: template_containers(o, "image"))],
        "DaemonSet": [("CONTAINERS", lambda o: template_containers(o, "name")),
                      ("IMAGES", lambda o: template_containers(o, "image")),
                      ("SELECTOR", lambda o: label_selector_text(spec_of(o).get("selector")))],
    },
    schemas={
        "Deployment": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields(
                "replicas", "minReadySeconds", "revisionHistoryLimit", "paused",
                "progressDeadlineSeconds", selector=LABEL_SELECTOR,
                template=POD_TEMPLATE,
                strategy=fields("type", rollingUpdate=fields("maxUnavailable",
                                                                           "maxSurge"))),
            status=fields("observedGeneration", "replicas", "updatedReplicas",
                                 "readyReplicas", "availableReplicas", "unavailableReplicas",
                                 "terminatingReplicas", "collisionCount", conditions=CONDITIONS),
        ),
        "DaemonSet": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields(
                "minReadySeconds", "revisionHistoryLimit", selector=LABEL_SELECTOR,
                template=POD_TEMPLATE,
                updateStrategy=fields("type", rollingUpdate=fields(
                    "maxUnavailable", "maxSurge"))),
            status=fields("currentNumberScheduled", "numberMisscheduled",
                                 "desiredNumberScheduled", "numberReady", "observedGeneration",
                                 "updatedNumberScheduled", "numberAvailable",
                                 "numberUnavailable", "collisionCount", conditions=CONDITIONS),
        ),
        "ControllerRevision": fields(*TOP, "data", "revision",
                                     metadata=OBJECT_META),
        "ReplicaSet": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("replicas", "minReadySeconds", selector=LABEL_SELECTOR,
                        template=POD_TEMPLATE),
            status=fields("replicas", "fullyLabeledReplicas", "readyReplicas",
                          "availableReplicas", "terminatingReplicas", "observedGeneration",
                          conditions=ListOf(CONDITION)),
        ),
        "StatefulSet": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields(
                "replicas", "volumeClaimTemplates", "serviceName", "podManagementPolicy",
                "revisionHistoryLimit", "minReadySeconds",
                selector=LABEL_SELECTOR, template=POD_TEMPLATE,
                updateStrategy=fields("type",
                                      rollingUpdate=fields("partition", "maxUnavailable")),
                persistentVolumeClaimRetentionPolicy=fields("whenDeleted", "whenScaled"),
                ordinals=fields("start"),
            ),
            status=fields("observedGeneration", "replicas", "readyReplicas", "currentReplicas",
                          "updatedReplicas", "currentRevision", "updateRevision",
                          "collisionCount", "availableReplicas", conditions=ListOf(CONDITION)),
        ),
    },
    # the status each is created with (its strategy's PrepareForCreate: the type's zero
    # status as the v1 JSON encodes it), so `.status.replicas` reads 0 before any controller
    initial_status={
        "Deployment": {},
        "ReplicaSet": {"replicas": 0},
        "StatefulSet": {"replicas": 0, "availableReplicas": 0},
        "DaemonSet": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                      "desiredNumberScheduled": 0, "numberReady": 0},
    },
)
