"""Tracing for Skiff: OpenTelemetry setup and trace context on objects (DO3).

The only package that imports the OpenTelemetry SDK; everything else uses this surface.
`setup_tracing` / `shutdown_tracing` install and flush the OTLP exporter and the grpc.aio
instrumentation (including aetcd's channels, see `instrument_etcd`); `inject_into_object`,
`context_from_object` and `start_span_from_object` carry a trace from the user's request
through the apiserver, scheduler and kubelet by way of an annotation on the object;
`current_traceparent` and `start_item_span` keep each caller's trace on a batched write.
"""

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from skiff.tracing._items import start_item_span
from skiff.tracing._objects import (
    TRACE_ANNOTATION,
    context_from_object,
    current_traceparent,
    inject_into_object,
    start_span_from_object,
)
from skiff.tracing._setup import (
    current_trace_id,
    instrument_etcd,
    setup_tracing,
    shutdown_tracing,
    tracer,
)

__all__ = [
    "TRACE_ANNOTATION",
    "Context",
    "Link",
    "Span",
    "SpanKind",
    "Status",
    "StatusCode",
    "Tracer",
    "context_from_object",
    "current_trace_id",
    "current_traceparent",
    "inject_into_object",
    "instrument_etcd",
    "setup_tracing",
    "shutdown_tracing",
    "start_item_span",
    "start_span_from_object",
    "tracer",
]
