"""The CEL environment: compiling and evaluating expressions with `cel-expr-python` (CEL's
own C++ runtime and type checker; `bench/cel_library.py` has the measurement behind the
choice) and Kubernetes' function libraries (`skiff.api.cel.library`).

Variables are declared by name with a type (`dyn` unless said); a program is cached by
(expression, variable declarations) in a small LRU, since the apiserver evaluates the same
rules on every write. Errors are translated to the texts cel-go (and so Kubernetes) prints:
compile errors keep cel's `ERROR: <input>:1:3: ...` form with the caret lines, run-time
errors read `no such key: x`, `no such overload`, `division by zero`...
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import (  # type: ignore[import-untyped]
    ext_bindings,
    ext_encoders,
    ext_math,
    ext_optional,
    ext_strings,
)
from google.protobuf import duration_pb2, timestamp_pb2

from skiff.api.cel import library


class CelCompileError(Exception):
    """An expression that does not compile; the message is what a user reads."""


class CelEvalError(Exception):
    """An expression that failed at run time; the message is what a user reads."""


# A variable's declared type, by name: the scalar CEL types, `list` (of dyn), `map` (string
# to dyn) and `dyn`.
_TYPES: dict[str, Any] = {
    "dyn": cel.Type.DYN,
    "bool": cel.Type.BOOL,
    "int": cel.Type.INT,
    "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE,
    "string": cel.Type.STRING,
    "bytes": cel.Type.BYTES,
    "timestamp": cel.Type.TIMESTAMP,
    "duration": cel.Type.DURATION,
    "list": cel.Type.List(cel.Type.DYN),
    "map": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
}
_RESULT_TYPES = {"BOOL": "bool", "INT": "int", "UINT": "uint", "DOUBLE": "double",
                 "STRING": "string", "BYTES": "bytes", "TIMESTAMP": "timestamp",
                 "DURATION": "duration", "DYN": "dyn", "NULL": "null"}


@dataclass(frozen=True)
class Program:
    """A compiled expression; `result_type` is what the checker proved it returns
    (`bool`, `string`, `list(string)`, `map(string,dyn)`, ... or `dyn` when only run time
    can tell)."""

    expression: str
    variables: tuple[tuple[str, str], ...]
    result_type: str
    _compiled: Any


def _declarations(variables: Sequence[str] | Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if isinstance(variables, Mapping):
        pairs = [(name, kind) for name, kind in variables.items()]
    else:
        pairs = [(name, "dyn") for name in variables]
    for name, kind in pairs:
        if kind not in _TYPES:
            raise ValueError(f"unknown CEL variable type {kind!r} for {name!r}")
    return tuple(sorted(pairs))


@lru_cache(maxsize=64)
def _environment(declarations: tuple[tuple[str, str], ...]) -> Any:
    return cel.NewEnv(
        variables={name: _TYPES[kind] for name, kind in declarations},
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(),
                    ext_bindings.ExtBindings(), ext_math.ExtMath(),
                    ext_encoders.ExtEncoders(), library.extension()],
    )


_STATUS = re.compile(r"^[A-Z_]+: ")
_STATUS_TAIL = re.compile(r"\s*\[[A-Z_]+\]\s*$")


def _compile_message(err: Exception) -> str:
    text = _STATUS_TAIL.sub("", _STATUS.sub("", str(err), count=1))
    return text.strip() or "compilation failed"


def _result_type(compiled: Any) -> str:
    name = str(compiled.return_type().name())
    if name in _RESULT_TYPES:
        return _RESULT_TYPES[name]
    return name.lower().replace(" ", "").replace("<", "(").replace(">", ")")


@lru_cache(maxsize=2048)
def _compile(expr: str, declarations: tuple[tuple[str, str], ...]) -> Program:
    try:
        compiled = _environment(declarations).compile(expr)
    except RuntimeError as err:
        raise CelCompileError(_compile_message(err)) from None
    return Program(expr, declarations, _result_type(compiled), compiled)


def compile_expression(expr: str, *,
                       variables: Sequence[str] | Mapping[str, str]) -> Program:
    """Compile `expr` with the given top-level variables (names, typed `dyn`, or a mapping
    of name to type name); raises CelCompileError with cel's message. Cached by text."""
    return _compile(expr, _declarations(variables))


def evaluate(program: Program, activation: Mapping[str, Any]) -> Any:
    """Evaluate a compiled program over plain JSON-like values (dicts, lists, str, int,
    float, bool, None; a variable that is a datetime/timedelta is a timestamp/duration,
    nested ones must be made with `timestamp()`/`duration()`); returns a plain Python
    value. Raises CelEvalError with the text cel-go prints."""
    data = {name: to_cel(value) for name, value in activation.items()}
    try:
        result = program._compiled.eval(data=data)
    except (RuntimeError, TypeError, ValueError, OverflowError):
        # a variable's value does not fit its declared type (or no CEL value is like it):
        # cel-go's word for an operand of the wrong type, never Python's text
        raise CelEvalError("no such overload") from None
    kind = str(result.type().name())
    if kind == "ERROR":
        raise CelEvalError(_eval_message(str(result.value())))
    if kind.startswith(("LIST", "MAP")):
        return result.plain_value()
    return result.value()


def to_cel(value: Any) -> Any:
    """A Python value as the runtime takes it: a datetime or timedelta (at the top, or
    wherever a caller put one) becomes the protobuf Timestamp or Duration CEL reads; plain
    JSON values pass unchanged, uncopied."""
    if isinstance(value, datetime.datetime):
        return timestamp(value)
    if isinstance(value, datetime.timedelta):
        return duration(value)
    return value


def timestamp(value: datetime.datetime) -> Any:
    """A CEL timestamp (naive datetimes are UTC)."""
    ts = timestamp_pb2.Timestamp()
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    ts.FromDatetime(value)
    return ts


def duration(value: datetime.timedelta) -> Any:
    """A CEL duration."""
    du = duration_pb2.Duration()
    du.FromTimedelta(value)
    return du


# cel-cpp's run-time error texts -> cel-go's (what Kubernetes prints).
_EVAL_TEXTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r'^Key not found in map\s*:\s*"?(.*?)"?$'), r"no such key: \1"),
    (re.compile(r"^No matching overloads? found.*$"), "no such overload"),
    (re.compile(r"^Applying SELECT to non-message type.*$"), "no such overload"),
    (re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"),
     r"index '\1' out of range in list size '\2'"),
    (re.compile(r'^No value with name "(.*)" found in Activation$'),
     r"no such attribute(s): \1"),
    (re.compile(r"^(Unexpected value type|Non-CEL value type) .*$"), "no such overload"),
    (re.compile(r"^.*object cannot be interpreted as .*$"), "no such overload"),
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^modulus by zero$"), "modulus by zero"),
]


def _eval_message(text: str) -> str:
    text = _STATUS_TAIL.sub("", _STATUS.sub("", text, count=1)).strip()
    for pattern, replacement in _EVAL_TEXTS:
        if pattern.match(text):
            return pattern.sub(replacement, text)
    return text or "evaluation failed"


_STRINGS = re.compile(
    r"""(?s)[rR]?(\"\"\".*?\"\"\"|'''.*?'''|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')""")


@lru_cache(maxsize=4096)
def references(expr: str, name: str) -> bool:
    """Whether `expr` refers to the top-level variable `name` (outside string literals and
    not as a field selection): how a CRD rule is known to be a transition rule."""
    code = _STRINGS.sub("''", expr)
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", code) is not None
