"""A tiny in-process OTLP/gRPC trace receiver for tests (a helper, not a test).

Services export spans with the real OTLP exporter to `receiver.endpoint`; tests then assert on
what arrived -- names, parent/child links, trace ids and `service.name` -- with `wait_for`.
It runs a plain (threaded) gRPC server, so it works alongside any asyncio loop or subprocess.

As a program (`python3 otlp_receiver.py --listen 0.0.0.0:4317`, e.g. in a container of the
compose network) it prints every span it receives as one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    service_name: str
    kind: int
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(any_value: common_pb2.AnyValue) -> Any:
    which = any_value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, which)


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(  # the gRPC method name
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service_name = str(resource.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            service_name=service_name,
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        self._receiver._collect(spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """Collects every span exported to it; `with OtlpReceiver() as r:` starts and stops it."""

    def __init__(self, address: str = "127.0.0.1:0",
                 on_spans: Callable[[list[ReceivedSpan]], None] | None = None) -> None:
        self._address = address
        self._on_spans = on_spans
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._server: grpc.Server | None = None
        self._port = 0

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("OtlpReceiver is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add_servicer = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add_servicer(_TraceService(self), server)  # type: ignore[no-untyped-call]
        self._port = server.add_insecure_port(self._address)
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """Wait until `predicate(spans)` holds and return the spans; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(list(self._spans)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = [s.name for s in self._spans]
                    raise AssertionError(f"OTLP receiver: condition not met; got spans {names}")
                self._lock.wait(remaining)
            return list(self._spans)

    def _collect(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self._spans.extend(spans)
            self._lock.notify_all()
        if self._on_spans is not None:
            self._on_spans(spans)

    def __enter__(self) -> OtlpReceiver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def span_from_json(line: str) -> ReceivedSpan:
    """One line `main` printed, back as a span."""
    return ReceivedSpan(**json.loads(line))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="print received OTLP spans as JSON lines")
    parser.add_argument("--listen", default="0.0.0.0:4317")
    args = parser.parse_args(argv)

    lock = threading.Lock()  # the server's threads write whole lines, never interleaved

    def emit(spans: list[ReceivedSpan]) -> None:
        lines = "".join(json.dumps(asdict(span), default=str) + "\n" for span in spans)
        with lock:
            sys.stdout.write(lines)
            sys.stdout.flush()

    receiver = OtlpReceiver(address=args.listen, on_spans=emit)
    receiver.start()
    print(f"listening on {args.listen}", flush=True)
    threading.Event().wait()  # until the container stops (SIGTERM ends the process)


if __name__ == "__main__":
    main()
