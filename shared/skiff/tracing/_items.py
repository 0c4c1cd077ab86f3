"""Trace context carried on a batched request's items, so a batch keeps each caller's trace.

A `Batch` call (issue 37) carries writes of many callers: the scheduler binding pods of many
traces, a kubelet updating the status of many pods. The call itself has one trace context
(whoever's write opened the batch), so each item carries its caller's W3C `traceparent`, and
the apiserver handles each item in a span of its own, named as the call the item would be
alone (`/skiff.v1.Api/Bind`), child of that caller's span and linked to the batch's span.
Jaeger then shows a binding in its pod's trace whether it was batched or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace

from skiff.tracing._objects import context_from_traceparent

__all__ = ["start_item_span"]


@contextmanager
def start_item_span(tracer: trace.Tracer, name: str,
                    traceparent: object) -> Iterator[trace.Span]:
    """A current SERVER span for one item of a batch: the item's caller's span is its parent
    (the batch's span its link); an item without a valid `traceparent` is a child of the
    batch's span. Nothing is started when the batch's own span is not recorded."""
    batch_span = trace.get_current_span()
    if not batch_span.get_span_context().is_valid:
        yield trace.INVALID_SPAN
        return
    parent = context_from_traceparent(traceparent)
    links = [trace.Link(batch_span.get_span_context())] if parent is not None else []
    with tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.SERVER,
                                      links=links) as span:
        yield span
