"""Events: the core v1 kind (its validation, columns and known fields) and the same Events
served as events.k8s.io/v1 under the names of the newer API.

Kubernetes stores one Event kind and serves it in both groups (pkg/apis/events/v1
conversion): `regarding` is `involvedObject`, `note` is `message`, `reportingController` is
`reportingComponent`, and the old counters and source are `deprecatedCount`,
`deprecatedFirstTimestamp`, `deprecatedLastTimestamp` and `deprecatedSource`; everything
else (`eventTime`, `series`, `action`, `reason`, `type`, `related`, `reportingInstance`)
has one name. An Event created through events.k8s.io/v1 is held to that API's stricter
rules (ValidateEventCreate): an eventTime, a type of Normal or Warning, the reporting
controller and instance, an action and a reason, and none of the deprecated fields. Its
field selectors name the new fields (`regarding.name`, `reportingController`:
skiff.api.fieldlabels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.columns import age
from skiff.api.errors import FieldError, invalid, required
from skiff.api.fieldchecks import as_dict, int_field, str_field
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView

V1 = "events.k8s.io/v1"
CORE = "v1"
# (core v1 name, events.k8s.io/v1 name)
_RENAMES = (("involvedObject", "regarding"), ("message", "note"),
            ("reportingComponent", "reportingController"), ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"))
_MAX_NOTE = 1024  # NoteLengthLimit
_MAX_SHORT = 128  # ReportingInstanceLengthLimit, ActionLengthLimit, ReasonLengthLimit


def _renamed(obj: Mapping[str, Any], pairs: tuple[tuple[str, str], ...],
             api_version: str) -> Obj:
    out = {k: v for k, v in obj.items() if k not in {old for old, _ in pairs}}
    for old, new in pairs:
        if old in obj:
            out[new] = obj[old]
    out["apiVersion"] = api_version
    return out


def to_core(event: Mapping[str, Any]) -> Obj:
    """An events.k8s.io/v1 Event as the core v1 Event it is stored as."""
    return _renamed(event, tuple((new, old) for old, new in _RENAMES), CORE)


def to_v1(event: Mapping[str, Any]) -> Obj:
    """A stored core v1 Event as events.k8s.io/v1 serves it."""
    return _renamed(event, _RENAMES, V1)


def validate_create(event: Mapping[str, Any]) -> list[FieldError]:
    """ValidateEventCreate for a request in events.k8s.io/v1 (names as that API's)."""
    errors: list[FieldError] = []
    if not event.get("eventTime"):
        errors.append(required("eventTime"))
    if event.get("type") not in ("Normal", "Warning"):
        errors.append(invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for deprecated in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp",
                       "deprecatedCount"):
        if event.get(deprecated):
            errors.append(invalid(deprecated, "", "needs to be unset"))
    source = event.get("deprecatedSource")
    if isinstance(source, Mapping) and (source.get("component") or source.get("host")):
        errors.append(invalid("deprecatedSource", "", "needs to be unset"))
    for key in ("reportingController", "reportingInstance", "action", "reason"):
        value = event.get(key)
        if not value:
            errors.append(required(key))
        elif key != "reportingController" and len(str(value)) > _MAX_SHORT:
            errors.append(invalid(key, "", f"can have at most {_MAX_SHORT} characters"))
    if len(str(event.get("note") or "")) > _MAX_NOTE:
        errors.append(invalid("note", "", f"can have at most {_MAX_NOTE} characters"))
    return errors


__all__ = ["V1", "to_core", "to_v1", "validate_create"]


def _validate_event(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    involved, errors = as_dict(obj.get("involvedObject"), "involvedObject")
    if obj.get("involvedObject") is None:
        errors.append(required("involvedObject"))
    elif not errors and not (involved.get("kind") or involved.get("name")):
        errors.append(required("involvedObject.name",
                               "involvedObject needs at least a kind or a name"))
    errors += int_field(obj, "count", "count", minimum=0)
    for key in ("reason", "message", "type", "action", "reportingComponent",
                "reportingInstance"):
        errors += str_field(obj, key, key)
    return errors


RULES = GroupRules(
    validators={"Event": _validate_event},
    columns={
        "Event": [("LAST SEEN", lambda o: age(o.get("lastTimestamp"))),
                  ("TYPE", lambda o: str(o.get("type", ""))),
                  ("REASON", lambda o: str(o.get("reason", ""))),
                  ("OBJECT", lambda o: f"{o.get('involvedObject', {}).get('kind', '').lower()}/"
                                       f"{o.get('involvedObject', {}).get('name', '')}"),
                  ("MESSAGE", lambda o: str(o.get("message", "")))],
    },
    schemas={
        "Event": fields(
            *TOP, "reason", "message", "firstTimestamp", "lastTimestamp", "count", "type",
            "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance",
            metadata=OBJECT_META,
            involvedObject=fields("kind", "namespace", "name", "uid", "apiVersion",
                                  "resourceVersion", "fieldPath"),
            source=fields("component", "host"),
        ),
    },
    # a request in events.k8s.io/v1 is pruned against that version's fields before conversion
    version_schemas={
        ("events.k8s.io/v1", "Event"): fields(
            *TOP, "eventTime", "series", "reportingController", "reportingInstance", "action",
            "reason", "note", "type", "related", "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp", "deprecatedCount", metadata=OBJECT_META,
            regarding=fields("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                             "fieldPath"),
            deprecatedSource=fields("component", "host")),
    },
)
