"""events.k8s.io/v1 Events as Kubernetes converts them to and from core v1 Events, the
create rules of that version, and its field labels."""

from __future__ import annotations

from skiff.api.groups.events import V1, to_core, to_v1, validate_create
from skiff.api.selectors import FieldSelector

CORE = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "d"},
        "involvedObject": {"kind": "Pod", "name": "web"}, "message": "hello",
        "reason": "Started", "type": "Normal", "count": 2, "source": {"component": "kubelet"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-1",
        "eventTime": "2026-01-01T00:00:00.000000Z"}


def test_ax6_events_v1_renames_and_round_trips() -> None:
    v1 = to_v1(CORE)
    assert v1["apiVersion"] == "events.k8s.io/v1"
    assert (v1["regarding"], v1["note"], v1["reportingController"], v1["deprecatedCount"],
            v1["deprecatedSource"], v1["deprecatedFirstTimestamp"]) == (
        {"kind": "Pod", "name": "web"}, "hello", "kubelet", 2, {"component": "kubelet"},
        "2026-01-01T00:00:00Z")
    assert not {"involvedObject", "message", "count", "source"} & set(v1)
    assert to_core(v1) == CORE


def test_ax6_events_v1_create_rules() -> None:
    good = {**to_v1(CORE), "action": "Start"}
    for key in ("deprecatedCount", "deprecatedSource", "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp"):
        good.pop(key)
    assert validate_create(good) == []
    errors = [str(e) for e in validate_create({"type": "Odd", "deprecatedCount": 1,
                                               "note": "x" * 1025})]
    assert errors == [
        "eventTime: Required value", 'type: Invalid value: "": has invalid value: Odd',
        'deprecatedCount: Invalid value: "": needs to be unset',
        "reportingController: Required value", "reportingInstance: Required value",
        "action: Required value", "reason: Required value",
        'note: Invalid value: "": can have at most 1024 characters']


def test_ax6_events_v1_field_labels_read_as_core_ones() -> None:
    """`regarding.name`, `reportingController` are read from the stored core Event's
    `involvedObject.name`, `reportingComponent`."""
    selector = FieldSelector.parse("regarding.name=web,reportingController!=kubelet,type=Normal",
                                   kind="Event", api_version=V1)
    other = FieldSelector.parse("regarding.name=web,reportingController!=other,type=Normal",
                                kind="Event", api_version=V1)
    assert not selector.matches(CORE) and other.matches(CORE)
