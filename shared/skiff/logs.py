"""Structured logs that carry the trace id, with no dependencies beyond the standard library.

Every service calls `setup_logging(component)` once. On a terminal a log line is readable:
`10:09:07.123 INFO  scheduler skiff.scheduler: bound pod node=n1 trace=4bf92f35…`; otherwise
(under compose, in CI) it is one JSON object per line with `ts`, `level`, `component`,
`logger`, `msg`, `trace_id` when a span is current, and every `extra={...}` key, so a log line
can be found from a trace in Jaeger and the other way round.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any, TextIO

from skiff.tracing import current_trace_id

__all__ = ["JsonFormatter", "TextFormatter", "setup_logging"]

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "trace_id",
}


class _TraceIdFilter(logging.Filter):
    """Stamps the current trace id on the record while still in the logging task/thread."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "trace_id"):
            record.trace_id = current_trace_id()
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self._component = component

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname,
            "component": self._component,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            entry["trace_id"] = trace_id
        for key, value in _extras(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exc"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """A readable single line for terminals (tracebacks follow on their own lines)."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self._component = component

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        parts = [f"{ts} {record.levelname:<5} {self._component} {record.name}: "]
        parts.append(record.getMessage())
        for key, value in _extras(record).items():
            parts.append(f" {key}={value}")
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            parts.append(f" trace={trace_id}")
        line = "".join(parts)
        if record.exc_info:
            line += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return line


def setup_logging(component: str, level: str = "INFO", *, stream: TextIO | None = None) -> None:
    """Send all logs to `stream` (stderr) as JSON, or as text when it is a terminal.

    Calling it again replaces the handler it installed before.
    """
    out = sys.stderr if stream is None else stream
    is_tty = getattr(out, "isatty", lambda: False)()
    formatter = TextFormatter(component) if is_tty else JsonFormatter(component)
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(_TraceIdFilter())
    handler.set_name("skiff")

    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "skiff"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
