"""DO3 tracing: OTLP export, grpc.aio and etcd child spans, trace context on objects.

`setup_tracing` changes process-wide state (the global provider, patched grpc.aio factories),
so every test that calls it runs a short script in a subprocess that exports to an
in-process OTLP receiver. Object propagation is tested in-process with a private provider.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from skiff.logs import setup_logging
from skiff.tracing import (
    TRACE_ANNOTATION,
    context_from_object,
    current_trace_id,
    current_traceparent,
    inject_into_object,
    start_item_span,
    start_span_from_object,
)

REPO = Path(__file__).resolve().parents[3]


def _load_receiver_module() -> ModuleType:
    path = REPO / "tests" / "integration" / "otlp_receiver.py"
    spec = importlib.util.spec_from_file_location("skiff_tests_otlp_receiver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


otlp = _load_receiver_module()


@pytest.fixture
def receiver() -> Iterator[Any]:
    with otlp.OtlpReceiver() as r:
        yield r


def run_script(script: str, *, endpoint: str | None) -> dict[str, Any]:
    """Run `script` in a fresh interpreter; it prints one JSON object as its last line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(REPO / "shared")
    env["OTEL_BSP_SCHEDULE_DELAY"] = "50"
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"script failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


SPAN_SCRIPT = """
    import json
    import grpc.aio
    from opentelemetry import trace
    from skiff.tracing import current_trace_id, setup_tracing, shutdown_tracing, tracer

    original_channel = grpc.aio.insecure_channel
    setup_tracing("test-svc")
    setup_tracing("ignored-second-call")
    with tracer("test").start_as_current_span("hello") as span:
        out = {
            "recording": span.is_recording(),
            "trace_id": current_trace_id(),
            "instrumented": grpc.aio.insecure_channel is not original_channel,
        }
    shutdown_tracing()
    shutdown_tracing()
    print(json.dumps(out))
"""


def test_do3_span_reaches_otlp_receiver(receiver: Any) -> None:
    out = run_script(SPAN_SCRIPT, endpoint=receiver.endpoint)
    assert out["recording"] and out["instrumented"]
    spans = receiver.wait_for(lambda spans: any(s.name == "hello" for s in spans))
    (hello,) = [s for s in spans if s.name == "hello"]
    assert hello.trace_id == out["trace_id"]
    assert hello.service_name == "test-svc"
    assert hello.parent_span_id == ""


def test_do3_setup_without_endpoint_exports_nothing() -> None:
    out = run_script(SPAN_SCRIPT, endpoint=None)
    assert out == {"recording": False, "trace_id": None, "instrumented": False}


GRPC_SCRIPT = """
    import asyncio, json
    import grpc, grpc.aio
    from skiff.tracing import setup_tracing, shutdown_tracing, tracer

    setup_tracing("grpc-svc")

    async def ping(request, context):
        return request

    async def main():
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "test.Echo", {"Ping": grpc.unary_unary_rpc_method_handler(ping)}
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with tracer("test").start_as_current_span("parent") as span:
                reply = await channel.unary_unary("/test.Echo/Ping")(b"hi")
        await server.stop(None)
        assert reply == b"hi"
        context = span.get_span_context()
        return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}

    out = asyncio.run(main())
    shutdown_tracing()
    print(json.dumps(out))
"""


def _client_and_server(spans: list[Any], method: str, parent_id: str) -> tuple[Any, Any] | None:
    clients = [s for s in spans if s.name == method and s.parent_span_id == parent_id]
    if not clients:
        return None
    servers = [s for s in spans if s.name == method and s.parent_span_id == clients[0].span_id]
    return (clients[0], servers[0]) if servers else None


def test_do3_grpc_aio_call_inside_span_is_a_child_span(receiver: Any) -> None:
    out = run_script(GRPC_SCRIPT, endpoint=receiver.endpoint)
    spans = receiver.wait_for(
        lambda spans: _client_and_server(spans, "/test.Echo/Ping", out["span_id"]) is not None
    )
    found = _client_and_server(spans, "/test.Echo/Ping", out["span_id"])
    assert found is not None
    client, server = found
    assert client.trace_id == server.trace_id == out["trace_id"]
    assert client.service_name == "grpc-svc"


ETCD_SCRIPT = """
    import asyncio, json
    import aetcd  # imported before setup_tracing, as services do: the hard case
    import grpc, grpc.aio
    from skiff.tracing import setup_tracing, shutdown_tracing, tracer

    setup_tracing("apiserver")

    async def range_(request, context):
        return b""  # an empty RangeResponse: key not found

    async def main():
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "etcdserverpb.KV", {"Range": grpc.unary_unary_rpc_method_handler(range_)}
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        client = aetcd.Client(host="127.0.0.1", port=port)
        with tracer("test").start_as_current_span("apiserver.get") as span:
            value = await client.get(b"/registry/pods/default/p")
        await client.close()
        await server.stop(None)
        assert value is None
        context = span.get_span_context()
        return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}

    out = asyncio.run(main())
    shutdown_tracing()
    print(json.dumps(out))
"""


def test_do3_etcd_call_inside_span_is_a_child_span(receiver: Any) -> None:
    out = run_script(ETCD_SCRIPT, endpoint=receiver.endpoint)
    method = "/etcdserverpb.KV/Range"
    spans = receiver.wait_for(
        lambda spans: _client_and_server(spans, method, out["span_id"]) is not None
    )
    found = _client_and_server(spans, method, out["span_id"])
    assert found is not None
    assert found[0].trace_id == out["trace_id"]


# -- trace context on objects, in-process with a private provider ----------------------------


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def make_pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"kind": "Pod", "metadata": metadata, "spec": {}}


def finished(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param(None, id="no-annotations-yet"),
        pytest.param({"team": "a"}, id="keeps-other-annotations"),
    ],
)
def test_do3_object_trace_context_round_trip(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    annotations: dict[str, str] | None,
) -> None:
    tracer = provider.get_tracer("test")
    pod = make_pod("p", annotations)
    with tracer.start_as_current_span("apiserver.create"):
        inject_into_object(pod)
        create_trace_id = current_trace_id()
    assert create_trace_id is not None and len(create_trace_id) == 32
    assert pod["metadata"]["annotations"][TRACE_ANNOTATION].startswith("00-" + create_trace_id)
    if annotations:
        assert pod["metadata"]["annotations"]["team"] == "a"

    assert current_trace_id() is None
    assert context_from_object(pod) is not None
    with start_span_from_object(tracer, "kubelet.start_pod", pod):
        assert current_trace_id() == create_trace_id

    create = finished(exporter, "apiserver.create")
    start = finished(exporter, "kubelet.start_pod")
    assert start.context is not None and create.context is not None
    assert start.parent is not None
    assert start.parent.span_id == create.context.span_id
    assert format_trace_id(start.context.trace_id) == create_trace_id


def test_do3_start_span_from_object_as_link(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("test")
    pod = make_pod("p")
    with tracer.start_as_current_span("apiserver.create"):
        inject_into_object(pod)
    with start_span_from_object(tracer, "gc.sweep", pod, link=True):
        pass
    create = finished(exporter, "apiserver.create")
    sweep = finished(exporter, "gc.sweep")
    assert sweep.parent is None
    assert sweep.context is not None and create.context is not None
    assert sweep.context.trace_id != create.context.trace_id
    (link,) = sweep.links
    assert format_span_id(link.context.span_id) == format_span_id(create.context.span_id)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p"), id="no-annotations"),
        pytest.param(make_pod("p", {TRACE_ANNOTATION: "garbage"}), id="malformed"),
        pytest.param(
            make_pod("p", {TRACE_ANNOTATION: "00-" + "0" * 32 + "-" + "0" * 16 + "-01"}),
            id="all-zero-ids",
        ),
        pytest.param({"kind": "Pod"}, id="no-metadata"),
    ],
)
def test_do3_object_without_valid_context_starts_a_fresh_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter, pod: dict[str, Any]
) -> None:
    assert context_from_object(pod) is None
    with start_span_from_object(provider.get_tracer("test"), "kubelet.start_pod", pod):
        pass
    assert finished(exporter, "kubelet.start_pod").parent is None


def test_do3_inject_outside_a_span_writes_nothing() -> None:
    pod = make_pod("p")
    inject_into_object(pod)
    assert "annotations" not in pod["metadata"]


def test_do3_a_batched_item_is_traced_in_its_callers_trace_linked_to_the_batch(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A binding batched with others still shows in its pod's trace (issue 37)."""
    tracer = provider.get_tracer("test")
    assert current_traceparent() is None  # outside a span: the item carries nothing
    with tracer.start_as_current_span("scheduler.bind"):
        traceparent = current_traceparent()
    with tracer.start_as_current_span("/skiff.v1.Api/Batch"):
        with start_item_span(tracer, "/skiff.v1.Api/Bind", traceparent):
            pass
        with start_item_span(tracer, "/skiff.v1.Api/UpdateStatus", "garbage"):
            pass
    bind, caller = finished(exporter, "/skiff.v1.Api/Bind"), finished(exporter, "scheduler.bind")
    batch = finished(exporter, "/skiff.v1.Api/Batch")
    assert bind.context is not None and caller.context is not None and batch.context is not None
    assert bind.parent is not None and bind.parent.span_id == caller.context.span_id
    assert bind.context.trace_id == caller.context.trace_id != batch.context.trace_id
    (link,) = bind.links
    assert link.context.span_id == batch.context.span_id
    # an item without a usable traceparent stays in the batch's trace
    status = finished(exporter, "/skiff.v1.Api/UpdateStatus")
    assert status.parent is not None and status.parent.span_id == batch.context.span_id
    assert not status.links


def test_do3_a_batched_item_starts_no_span_when_the_batch_is_not_traced(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with start_item_span(provider.get_tracer("test"), "/skiff.v1.Api/Bind", None):
        assert current_trace_id() is None
    assert not exporter.get_finished_spans()


# -- logs carry the trace id -----------------------------------------------------------------


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    setup_logging("kubelet", "DEBUG", stream=stream)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def test_json_log_line_carries_trace_id_and_extras(
    provider: TracerProvider, log_stream: io.StringIO
) -> None:
    log = logging.getLogger("skiff.kubelet")
    with provider.get_tracer("test").start_as_current_span("kubelet.start_pod"):
        log.info("started %s", "p", extra={"pod": "default/p"})
        trace_id = current_trace_id()
    log.warning("outside")
    inside, outside = (json.loads(line) for line in log_stream.getvalue().splitlines())
    assert inside["msg"] == "started p"
    assert inside["trace_id"] == trace_id
    assert inside["pod"] == "default/p"
    assert (inside["level"], inside["component"], inside["logger"]) == (
        "INFO",
        "kubelet",
        "skiff.kubelet",
    )
    assert inside["ts"].endswith("Z")
    assert "trace_id" not in outside
