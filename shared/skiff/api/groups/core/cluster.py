"""Nodes and Namespaces (core/v1): their defaults, validation, kubectl's columns (STATUS,
ROLES, the node addresses and info of `-o wide`) and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, condition, meta
from skiff.api.errors import FieldError, duplicate, invalid, required
from skiff.api.fieldchecks import as_dict, as_list, enum_field
from skiff.api.fielddefaults import child, set_default
from skiff.api.fieldschema import CONDITION, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.podspec import TAINT_EFFECTS
from skiff.api.selectors import label_value_problems, validate_label_key
from skiff.api.types import Obj, ObjView
from skiff.api.wellknown import LABEL_METADATA_NAME, LABEL_NODE_ROLE, NODE_ROLE_LABEL_PREFIX


def _validate_node(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    taints, errs = as_list(spec.get("taints"), "spec.taints")
    errors += errs
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(taints):
        tpath = f"spec.taints[{i}]"
        taint, errs = as_dict(item, tpath)
        errors += errs
        key, effect = taint.get("key"), taint.get("effect")
        if not key:
            errors.append(required(f"{tpath}.key"))
        else:
            errors += validate_label_key(key, f"{tpath}.key")
        if taint.get("value"):
            errors += [invalid(f"{tpath}.value", taint["value"], p)
                       for p in label_value_problems(str(taint["value"]))]
        errors += enum_field(taint, "effect", f"{tpath}.effect", TAINT_EFFECTS, is_required=True)
        if isinstance(key, str) and isinstance(effect, str):
            if (key, effect) in seen:
                errors.append(duplicate(tpath, f"{key}:{effect}"))
            seen.add((key, effect))
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        errors.append(invalid("spec.unschedulable", unschedulable, "must be a boolean"))
    return errors


def _validate_nothing(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return []


def _default_node(obj: Obj) -> None:
    child(obj, "spec")


def _default_namespace(obj: Obj) -> None:
    set_default(child(obj, "status"), "phase", "Active")
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and name:
        # kube-apiserver keeps this label equal to the name (namespaceSelectors match on it)
        child(child(obj, "metadata"), "labels")[LABEL_METADATA_NAME] = name
    if not (obj.get("metadata") or {}).get("deletionTimestamp"):
        # the namespace controller's finalizer: deletion completes once it emptied it
        set_default(child(obj, "spec"), "finalizers", ["kubernetes"])


def node_status(node: Obj) -> str:
    ready = condition(node, "Ready")
    if ready is None or ready.get("status") == "Unknown":
        word = "Unknown" if ready else "NotReady"
    else:
        word = "Ready" if ready.get("status") == "True" else "NotReady"
    if node.get("spec", {}).get("unschedulable"):
        word += ",SchedulingDisabled"
    return word


def node_roles(node: Obj) -> str:
    """kubectl's findNodeRoles: `node-role.kubernetes.io/<role>` labels and the
    `kubernetes.io/role` label's value, sorted."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = {key.removeprefix(NODE_ROLE_LABEL_PREFIX) for key in labels
             if key.startswith(NODE_ROLE_LABEL_PREFIX)}
    if labels.get(LABEL_NODE_ROLE):
        roles.add(str(labels[LABEL_NODE_ROLE]))
    roles.discard("")
    return ",".join(sorted(roles)) or "<none>"


def _address(o: Obj, type_: str) -> str:
    return next((str(a.get("address", "")) for a in o.get("status", {}).get("addresses", [])
                 if a.get("type") == type_), "<none>")


def _node_info(o: Obj, field: str) -> str:
    return str(o.get("status", {}).get("nodeInfo", {}).get(field) or "<unknown>")


RULES = GroupRules(
    defaulters={"Node": _default_node, "Namespace": _default_namespace},
    validators={"Namespace": _validate_nothing, "Node": _validate_node},
    columns={
        "Node": [("NAME", meta("name")), ("STATUS", node_status),
                 ("ROLES", node_roles), ("AGE", age_column),
                 ("VERSION", lambda o: str(o.get("status", {}).get("nodeInfo", {}).get(
                     "kubeletVersion", "")))],
        "Namespace": [("NAME", meta("name")),
                      ("STATUS", lambda o: str(o.get("status", {}).get("phase", "Active"))),
                      ("AGE", age_column)],
    },
    wide={
        "Node": [("INTERNAL-IP", lambda o: _address(o, "InternalIP")),
                 ("EXTERNAL-IP", lambda o: _address(o, "ExternalIP")),
                 ("OS-IMAGE", lambda o: _node_info(o, "osImage")),
                 ("KERNEL-VERSION", lambda o: _node_info(o, "kernelVersion")),
                 ("CONTAINER-RUNTIME", lambda o: _node_info(o, "containerRuntimeVersion"))],
    },
    schemas={
        "Namespace": fields(*TOP, metadata=OBJECT_META, spec=fields("finalizers"),
                            status=fields("phase", conditions=ListOf(CONDITION))),
        "Node": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource",
                        "externalID",
                        taints=ListOf(fields("key", "value", "effect", "timeAdded"))),
            status=fields("capacity", "allocatable", "phase", "addresses", "daemonEndpoints",
                          "nodeInfo", "images", "volumesInUse", "volumesAttached", "config",
                          "runtimeHandlers", "features", "declaredFeatures",
                          conditions=ListOf(CONDITION)),
        ),
    },
)
