"""Events are named as client-go names them, `<object>.<hex of the time in ns>`, so one
object's Events list in the order they happened (`kubectl describe` showed a pod's Started
before its Scheduled when the names were random)."""

from __future__ import annotations

import re

from skiff.client import EventRecorder
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock


def event_names(api: FakeClient) -> list[str]:
    """The names of the Events created, in the order they were created."""
    return [str(a.object["metadata"]["name"]) for a in api.calls("create", "events")
            if a.object is not None]


async def test_event_names_follow_the_time_they_were_recorded() -> None:
    api, clock = FakeClient(), FakeClock(start=1_790_000_000.0)
    recorder = EventRecorder(api, component="kubelet", clock=clock)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "uid": "u1"}}
    for i in range(12):
        await recorder.event(pod, "Normal", f"Reason{i}", f"message {i}")
        if i % 3 == 0:
            clock.advance(0.25)
    names = event_names(api)
    assert len(names) == 12
    assert all(re.fullmatch(r"p1\.[0-9a-f]{16}", n) for n in names), names
    assert sorted(names) == names  # etcd's key order is the order of events
    assert names[0] == f"p1.{int(1_790_000_000.0 * 1e9):x}"


async def test_a_name_taken_by_another_process_still_records_the_event() -> None:
    api, clock = FakeClient(), FakeClock(start=1_790_000_000.0)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "uid": "u1"}}
    for component in ("kubelet", "default-scheduler"):  # two recorders, the same instant
        recorder = EventRecorder(api, component=component, clock=clock)
        await recorder.event(pod, "Normal", component, "same instant")
    names = event_names(api)
    assert len(names) == 3  # the second name was taken: created again under another
    assert len({e["metadata"]["name"] for e in api.objects("events")}) == 2
