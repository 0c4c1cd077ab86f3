"""For the whole code base: no `extra={...}` key may name a LogRecord
attribute (message, msg, args, name, ...), or logging raises KeyError at that call."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


def _clashes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {key.value!r}"
                          for key in keyword.value.keys
                          if isinstance(key, ast.Constant) and key.value in RESERVED]
    return found


def test_no_log_extra_key_overwrites_a_logrecord_attribute() -> None:
    files = [p for d in ("shared", "services") for p in (ROOT / d).rglob("*.py")]
    assert files
    assert [c for p in files for c in _clashes(p)] == []
