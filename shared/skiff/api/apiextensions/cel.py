"""CEL `x-kubernetes-validations` for custom resources (SPEC EX3): compiling a CRD's rules
when the CRD is written, and evaluating them against a custom object (with `oldSelf` for
transition rules) on every write, with Kubernetes' messages and field paths. The CEL
environment itself (also used by admission matchConditions and policies) is `skiff.api.cel`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skiff.api.errors import FieldError
from skiff.api.types import ObjView


class CelCompileError(Exception):
    """An expression that does not compile; the message is what a user reads."""


class CelEvalError(Exception):
    """An expression that failed at run time; the message is what a user reads."""


class Program:
    """A compiled expression."""


def compile_expression(expr: str, *, variables: Sequence[str]) -> Program:
    """Compile `expr` with the given top-level variables; raises CelCompileError."""
    raise NotImplementedError


def evaluate(program: Program, activation: Mapping[str, Any]) -> Any:
    """Evaluate a compiled program; raises CelEvalError."""
    raise NotImplementedError


def check_schema_rules(schema: ObjView, *, path: str) -> list[FieldError]:
    """Compile every x-kubernetes-validations rule (and messageExpression) of a CRD version's
    openAPIV3Schema; a rule that does not compile is a FieldError at Kubernetes' path
    (`...openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`)."""
    return []


def validate_rules(schema: ObjView, obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """Evaluate every rule of the schema against obj (`self`) and, for transition rules,
    against old (`oldSelf`) where an old value corresponds, as Kubernetes does."""
    return []
