"""Common Expression Language for Skiff's API: one CEL environment shared by CRD validation
rules (SPEC EX3), admission webhooks' matchConditions (EX6) and ValidatingAdmissionPolicy
(EX7). Compile an expression once (`compile_expression`, cached by text), evaluate it with an
activation of plain JSON-like values (`evaluate`); errors carry the text Kubernetes shows."""

from skiff.api.cel.env import (
    CelCompileError,
    CelEvalError,
    Program,
    compile_expression,
    evaluate,
    references,
)

__all__ = ["CelCompileError", "CelEvalError", "Program", "compile_expression", "evaluate",
           "references"]
