"""Events are named as client-go names them, `<object>.<hex of the time in ns>`, so one
object's Events list in the order they happened (`kubectl describe` showed a pod's Started
before its Scheduled when the names were random)."""

from __future__ import annotations

import re
from typing import Any, cast

from skiff.api import ApiError, Reason
from skiff.client import ApiClient, EventRecorder
from skiff.clock import FakeClock


class CreatingApi:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        if name in self.names:
            raise ApiError(Reason.ALREADY_EXISTS, f'events "{name}" already exists')
        self.names.append(name)
        return obj


async def test_event_names_follow_the_time_they_were_recorded() -> None:
    api, clock = CreatingApi(), FakeClock(start=1_790_000_000.0)
    recorder = EventRecorder(cast(ApiClient, api), component="kubelet", clock=clock)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "uid": "u1"}}
    for i in range(12):
        await recorder.event(pod, "Normal", f"Reason{i}", f"message {i}")
        if i % 3 == 0:
            clock.advance(0.25)
    assert len(api.names) == 12
    assert all(re.fullmatch(r"p1\.[0-9a-f]{16}", n) for n in api.names), api.names
    assert sorted(api.names) == api.names  # etcd's key order is the order of events
    assert api.names[0] == f"p1.{int(1_790_000_000.0 * 1e9):x}"


async def test_a_name_taken_by_another_process_still_records_the_event() -> None:
    api, clock = CreatingApi(), FakeClock(start=1_790_000_000.0)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "uid": "u1"}}
    for component in ("kubelet", "default-scheduler"):  # two recorders, the same instant
        recorder = EventRecorder(cast(ApiClient, api), component=component, clock=clock)
        await recorder.event(pod, "Normal", component, "same instant")
    assert len(set(api.names)) == 2
