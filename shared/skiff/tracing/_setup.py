"""Process-wide OpenTelemetry setup: the provider, the OTLP exporter and gRPC instrumentation.

Each service calls `setup_tracing(name)` once at start and `shutdown_tracing()` on SIGTERM.
With `OTEL_EXPORTER_OTLP_ENDPOINT` unset nothing is installed and every span is a cheap no-op.
With it set, spans go through a `BatchSpanProcessor` (which reads `OTEL_BSP_*` itself) to an
OTLP/gRPC exporter, and grpc.aio clients and servers are instrumented, so calls between
services -- and from the apiserver to etcd -- become child spans of the current span.

aetcd binds `grpc.aio.insecure_channel` into `aetcd.rpc` at import time (`from grpc.aio import
insecure_channel`), so the instrumentor's patch of `grpc.aio` never reaches it when aetcd was
imported first. `instrument_etcd()` re-points `aetcd.rpc` at the patched factories; it is
called by `setup_tracing` and is idempotent. Channels created before setup stay untraced, so
set up tracing before connecting to etcd.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from opentelemetry import trace

__all__ = ["current_trace_id", "instrument_etcd", "setup_tracing", "shutdown_tracing", "tracer"]

log = logging.getLogger(__name__)

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"

# Long-lived etcd streams would make spans that last as long as the process.
_UNTRACED_CLIENT_METHODS = ("/etcdserverpb.Watch/Watch", "/etcdserverpb.Lease/LeaseKeepAlive")

_lock = threading.Lock()
_provider: Any = None  # the SDK TracerProvider once enabled
_configured = False


def setup_tracing(service_name: str) -> None:
    """Install tracing for this process once; later calls do nothing."""
    global _provider, _configured
    with _lock:
        if _configured:
            return
        _configured = True
        endpoint = os.environ.get(ENDPOINT_ENV, "").strip()
        if not endpoint:
            return
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _provider = provider
        _instrument_grpc_aio(provider)
    instrument_etcd()
    log.info("tracing enabled", extra={"endpoint": endpoint, "service": service_name})


def _instrument_grpc_aio(provider: Any) -> None:
    from opentelemetry.instrumentation.grpc import (
        GrpcAioInstrumentorClient,
        GrpcAioInstrumentorServer,
        filters,
    )

    untraced = [filters.full_method_name(m) for m in _UNTRACED_CLIENT_METHODS]
    client_filter = filters.negate(filters.any_of(filters.health_check(), *untraced))
    server_filter = filters.negate(filters.health_check())
    client = GrpcAioInstrumentorClient(filter_=client_filter)  # type: ignore[no-untyped-call]
    server = GrpcAioInstrumentorServer(filter_=server_filter)  # type: ignore[no-untyped-call]
    client.instrument(tracer_provider=provider)
    server.instrument(tracer_provider=provider)


def instrument_etcd() -> bool:
    """Make aetcd create its channels through the instrumented grpc.aio factories.

    Returns whether aetcd is now traced: False when tracing is off or aetcd is not installed.
    """
    if _provider is None:
        return False
    try:
        import aetcd.rpc
        import grpc.aio
    except ImportError:
        return False
    aetcd.rpc.insecure_channel = grpc.aio.insecure_channel
    aetcd.rpc.secure_channel = grpc.aio.secure_channel
    return True


def shutdown_tracing() -> None:
    """Flush buffered spans and stop exporting (call on SIGTERM). Safe to call repeatedly."""
    global _provider
    with _lock:
        provider, _provider = _provider, None
    if provider is None:
        return
    try:
        provider.force_flush()
        provider.shutdown()
    except Exception as exc:  # exporting is best effort; never fail a shutdown over it
        print(f"skiff.tracing: flushing spans failed: {exc}", file=sys.stderr)


def tracer(name: str) -> trace.Tracer:
    """The tracer for `name` (a module or component); a no-op tracer when tracing is off."""
    return trace.get_tracer(name)


def current_trace_id() -> str | None:
    """The current span's trace id as 32 hex digits, for logs; None outside a valid span."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return trace.format_trace_id(context.trace_id)
