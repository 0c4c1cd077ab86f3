"""Which fields a field selector may name, per kind, and the value each compares as.

kube-apiserver does not filter on any path a client names: each kind's registry strategy
exposes a fixed set of selectable fields (`GetAttrs` / `ToSelectableFields`), and the
field label conversion of its API version refuses every other label with 400 BadRequest
(`field label not supported: spec.foo`; kinds without a conversion of their own accept only
`metadata.name` and `metadata.namespace`). The values come from the typed object, so a
field the JSON leaves out compares as its Go zero value or its default: a pod without
`hostNetwork` has `spec.hostNetwork=false`, a Job without `succeeded` has
`status.successful=0`. Skiff stores plain dicts, so this table states both once;
`FieldSelector.parse(text, kind=...)` consults it, which is how the registry's list and
watch (both fronts) check and match a selector for the kind they serve.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.errors import ApiError, Reason
from skiff.api.types import ObjView

Extractor = Callable[[ObjView], str]

NAME = "metadata.name"
NAMESPACE = "metadata.namespace"


def _get(obj: ObjView, path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _text(value: Any, absent: str) -> str:
    """A value printed as Kubernetes' field sets print it (`strconv` forms)."""
    if value is None or value == "":
        return absent
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return absent  # a list or an object is never a selectable field's value


def read(obj: ObjView, path: str, *, absent: str = "") -> str:
    """The field at a dotted path as a field selector compares it; `absent` is what a
    missing or empty one compares as."""
    return _text(_get(obj, path), absent)


def at(path: str, *, absent: str = "") -> Extractor:
    """An extractor of `read(obj, path, absent=absent)`."""
    return lambda obj: read(obj, path, absent=absent)


def _pod_ip(pod: ObjView) -> str:
    ips = _get(pod, "status.podIPs")
    if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
        return _text(ips[0].get("ip"), "")
    return _text(_get(pod, "status.podIP"), "")


def _service_account(pod: ObjView) -> str:
    # the deprecated `serviceAccount` fills serviceAccountName when that is empty
    return _text(_get(pod, "spec.serviceAccountName") or _get(pod, "spec.serviceAccount"), "")


def _event_source(event: ObjView) -> str:
    return _text(_get(event, "source.component") or _get(event, "reportingComponent"), "")


def _never_set(_obj: ObjView) -> str:
    return ""  # accepted by the conversion, but not among the object's selectable fields


@dataclass(frozen=True)
class KindFieldLabels:
    """The field labels one kind accepts and how each reads an object."""

    fields: Mapping[str, Extractor]
    aliases: Mapping[str, str] = field(default_factory=dict)
    # True: the kind's API version registers its own field label conversion (its refusal
    # says "field label not supported"); False: apimachinery's default one (metadata only).
    own_conversion: bool = True

    def canonical(self, label: str) -> str:
        """The label to match on, or 400 BadRequest if the kind does not support it."""
        label = self.aliases.get(label, label)
        if label in self.fields:
            return label
        if self.own_conversion:
            raise ApiError(Reason.BAD_REQUEST, f"field label not supported: {label}")
        known = ", ".join(f'"{name}"' for name in self.fields)
        raise ApiError(Reason.BAD_REQUEST, f'"{label}" is not a known field selector: '
                                           f"only {known}")

    def value(self, obj: ObjView, label: str) -> str:
        extract = self.fields.get(label)
        return extract(obj) if extract is not None else ""


_METADATA: dict[str, Extractor] = {NAME: at(NAME), NAMESPACE: at(NAMESPACE)}
# an Event's object reference (involvedObject; `regarding` in events.k8s.io/v1)
_REFERENCE = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

# Kinds whose API version has a field label conversion (pkg/apis/core/v1 and
# pkg/apis/batch/v1 conversion.go); absent fields compare as the value the typed,
# defaulted object would hold.
_TABLE: dict[str, KindFieldLabels] = {
    "Pod": KindFieldLabels(
        {**_METADATA,
         "spec.nodeName": at("spec.nodeName"),
         "spec.restartPolicy": at("spec.restartPolicy", absent="Always"),
         "spec.schedulerName": at("spec.schedulerName", absent="default-scheduler"),
         "spec.serviceAccountName": _service_account,
         "spec.hostNetwork": at("spec.hostNetwork", absent="false"),
         "status.phase": at("status.phase"),
         "status.podIP": _pod_ip,
         "status.podIPs": _never_set,
         "status.nominatedNodeName": at("status.nominatedNodeName")},
        aliases={"spec.host": "spec.nodeName"}),  # old v1 clients
    "Node": KindFieldLabels({NAME: at(NAME),
                             "spec.unschedulable": at("spec.unschedulable", absent="false")}),
    "Namespace": KindFieldLabels({NAME: at(NAME),
                                  "status.phase": at("status.phase", absent="Active")}),
    "Event": KindFieldLabels(
        {**_METADATA,
         **{f"involvedObject.{f}": at(f"involvedObject.{f}") for f in _REFERENCE},
         "reason": at("reason"),
         "reportingComponent": at("reportingComponent"),
         "source": _event_source,
         "type": at("type")}),
    "Secret": KindFieldLabels({**_METADATA, "type": at("type", absent="Opaque")}),
    "Service": KindFieldLabels({**_METADATA, "spec.clusterIP": at("spec.clusterIP"),
                                "spec.type": at("spec.type", absent="ClusterIP")}),
    "ReplicationController": KindFieldLabels(
        {**_METADATA, "status.replicas": at("status.replicas", absent="0")}),
    "Job": KindFieldLabels({**_METADATA,
                            "status.successful": at("status.succeeded", absent="0")}),
    # the signers' controllers list their own CSRs (SPEC JN2)
    "CertificateSigningRequest": KindFieldLabels({**_METADATA,
                                                  "spec.signerName": at("spec.signerName")}),
}

# Every other kind (apps/v1 included: its ReplicaSets answer `status.replicas` with 400).
_DEFAULT = KindFieldLabels(_METADATA, own_conversion=False)

# A kind served in another version names its fields that version's way, read from the
# stored object: events.k8s.io/v1 Events (pkg/apis/events/v1 conversion) are core Events.
_VERSIONED: dict[tuple[str, str], KindFieldLabels] = {
    ("events.k8s.io/v1", "Event"): KindFieldLabels(
        {**_METADATA,
         **{f"regarding.{f}": at(f"involvedObject.{f}") for f in _REFERENCE},
         "reason": at("reason"),
         "reportingController": at("reportingComponent"),
         "deprecatedSource": _event_source,
         "type": at("type")}),
}


def field_labels(kind: str, api_version: str = "") -> KindFieldLabels:
    """The field labels `kind` (e.g. "Pod") supports in a field selector, in `api_version`
    when it is served in one other than the stored version."""
    return _VERSIONED.get((api_version, kind)) or _TABLE.get(kind, _DEFAULT)


__all__ = ["KindFieldLabels", "at", "field_labels", "read"]
