"""Perturbations in traces (issue 35: "every perturbation is recorded ... in traces, so
Jaeger shows what the controller saw and when"): when a perturbation changes a request,
the request's own span (the gRPC server span the instrumentation opened; a watch's span
for its events) gets `skiff.perturbation.name` / `skiff.perturbation.effect` attributes
and one span event per change; a crash on write gets a span of its own.

With tracing off every span is a no-op and nothing here costs more than a call.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry import trace

from skiff.tracing import Span, tracer

NAME = "skiff.perturbation.name"
EFFECT = "skiff.perturbation.effect"


def annotate(name: str, effect: str, **attributes: str | int | bool) -> None:
    """Mark the current request's span: perturbation `name` had `effect` on it."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute(NAME, name)
    span.set_attribute(EFFECT, effect)
    span.add_event(f"perturbation {effect}", {NAME: name, EFFECT: effect,
                                              **{f"skiff.{k}": v
                                                 for k, v in attributes.items()}})


def crash_span(name: str, *, target: str, revision: int, writer: str
               ) -> AbstractContextManager[Span]:
    """The span of one crash on write firing (a child of the write's request span)."""
    return tracer("skiff.apiserver.perturbation").start_as_current_span(
        "perturbation crash", attributes={NAME: name, EFFECT: "crash",
                                          "skiff.perturbation.target": target,
                                          "skiff.revision": revision,
                                          "skiff.writer": writer})
