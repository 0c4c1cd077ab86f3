"""CT1 perturbations in traces (issue 35: "every perturbation is recorded ... in traces"):
a stale read marks the request's span (`skiff.perturbation.name`/`effect: stale-read`,
served and head revisions), a missed event marks the watch's span (`event-missed`, its
type, object and revision), and a crash on write fires in a span of its own, a child of
the write's span, naming its target. Spans go to an in-memory exporter of a private
provider."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncGenerator, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation import traces
from skiff.auth import UserInfo
from tests.unit.apiserver.perturbation.helpers import applied, cm, pert, running_registry


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider,
                                                             InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(traces, "tracer", provider.get_tracer)
    yield provider, exporter
    provider.shutdown()


def _events(span: ReadableSpan) -> list[dict[str, object]]:
    return [dict(ev.attributes or {}) for ev in span.events]


async def test_ct1_trace_stale_read_marks_the_request_span(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    async with running_registry() as registry:
        first = await registry.create("configmaps", "default", cm("a"))
        pinned = int(first.object["metadata"]["resourceVersion"])
        await registry.create("perturbations", None, pert(
            "old", subject={"user": "op"}, staleView={"revision": pinned}))
        await applied(registry, "old")
        await registry.create("configmaps", "default", cm("b"))
        current_user.set(UserInfo("op"))
        with provider.get_tracer("test").start_as_current_span("List"):
            await registry.list("configmaps", "default", allow_cached=True)
        with provider.get_tracer("test").start_as_current_span("consistent List"):
            await registry.list("configmaps", "default")
    stale, fresh = exporter.get_finished_spans()
    assert (stale.attributes or {}).get("skiff.perturbation.name") == "old"
    assert (stale.attributes or {}).get("skiff.perturbation.effect") == "stale-read"
    [event] = _events(stale)
    assert event["skiff.served"] == pinned and int(str(event["skiff.head"])) > pinned
    assert not fresh.attributes and not fresh.events  # not changed: not marked


async def test_ct1_trace_missed_event_marks_the_watch_span(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    async with running_registry() as registry:
        made = await registry.create("configmaps", "default", cm("a"))
        await registry.create("perturbations", None, pert(
            "deaf", subject={"user": "op"}, missedEvents={"types": ["MODIFIED"]}))
        await applied(registry, "deaf")
        current_user.set(UserInfo("op"))
        with provider.get_tracer("test").start_as_current_span("Watch"):
            watch = registry.watch_batches(
                "configmaps", "default",
                resource_version=made.object["metadata"]["resourceVersion"])
            assert isinstance(watch, AsyncGenerator)
            pending = asyncio.ensure_future(anext(watch))
            await asyncio.sleep(0.05)
            changed = await registry.update("configmaps", "default", cm("a", "1"), name="a")
            await registry.create("configmaps", "default", cm("b"))
            batch = await asyncio.wait_for(pending, 3)
            assert [e.object["metadata"]["name"] for e in batch] == ["b"]
            await watch.aclose()
    [span] = exporter.get_finished_spans()
    assert (span.attributes or {}).get("skiff.perturbation.effect") == "event-missed"
    assert _events(span) == [{
        "skiff.perturbation.name": "deaf", "skiff.perturbation.effect": "event-missed",
        "skiff.type": "MODIFIED", "skiff.object": "default/a",
        "skiff.revision": int(changed.object["metadata"]["resourceVersion"])}]


async def test_ct1_trace_crash_on_write_gets_its_own_span(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    victim = subprocess.Popen(["sleep", "30"])
    try:
        async with running_registry() as registry:
            await registry.create("perturbations", None, pert(
                "boom", subject={"user": "op"},
                crashOnWrite={"after": 1, "target": {"pid": victim.pid}}))
            await applied(registry, "boom")
            current_user.set(UserInfo("op"))
            with provider.get_tracer("test").start_as_current_span("Create") as write:
                made = await registry.create("configmaps", "default", cm("a"))
            async with asyncio.timeout(5):
                while len(exporter.get_finished_spans()) < 2:
                    await asyncio.sleep(0.02)
        assert victim.wait(5) == -9
    finally:
        victim.kill()
    crash = next(s for s in exporter.get_finished_spans() if s.name == "perturbation crash")
    assert crash.parent is not None
    assert crash.parent.span_id == write.get_span_context().span_id
    assert dict(crash.attributes or {}) == {
        "skiff.perturbation.name": "boom", "skiff.perturbation.effect": "crash",
        "skiff.perturbation.target": f"pid {victim.pid}",
        "skiff.revision": int(made.object["metadata"]["resourceVersion"]),
        "skiff.writer": "op"}
