"""One policy evaluated for one request and one param object (Kubernetes'
`policy/validating/validator.go`): the matchConditions first (a false one skips the policy;
errors follow failurePolicy), then each validation — true admits, false denies with the
messageExpression's string, the message, or `failed expression: <expression>`, and the
validation's reason (Invalid by default); an expression that fails to evaluate denies with
`expression '<expression>' resulted in error: <error>` under failurePolicy Fail and is
ignored under Ignore — then the auditAnnotations. `variables.<name>` are evaluated lazily:
only those an expression names (and those they name), once per evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api import cel
from skiff.api.groups.admissionpolicies import VARIABLE_REFERENCE, expression_variables
from skiff.apiserver.admission.policy.source import Policy

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes


@dataclass(frozen=True)
class Decision:
    """A validation's outcome: `deny` with its message and reason ("" reads as Invalid),
    or `admit`."""

    action: str  # "admit" | "deny"
    message: str = ""
    reason: str = ""


@dataclass
class Inputs:
    """The CEL variables of one request, the same for every param object: the object and
    the old one in the matched version (None when absent), the request
    (AdmissionRequest's fields but uid, object and oldObject), the namespace object."""

    obj: Any
    old: Any
    request: Mapping[str, Any]
    namespace: Any


@dataclass
class Evaluation:
    """What one evaluation decided (acted on as the binding's validationActions say), the
    audit annotations it publishes, and the annotations that failed (each denies the
    request whatever the actions, as in Kubernetes)."""

    decisions: list[Decision] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    annotation_denials: list[str] = field(default_factory=list)


def _error_text(expression: str, err: Exception) -> str:
    return f"expression '{expression}' resulted in error: {err}"


class _Scope:
    """The activation of one (policy, param) evaluation, with variables resolved on
    demand."""

    def __init__(self, policy: Policy, inputs: Inputs, params: Any) -> None:
        self._policy = policy
        self._base: dict[str, Any] = {"object": inputs.obj, "oldObject": inputs.old,
                                      "request": dict(inputs.request),
                                      "namespaceObject": inputs.namespace}
        if policy.param_kind is not None:
            self._base["params"] = params
        self._expressions = dict(policy.variables)
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}

    def names(self, *, authorizer: bool, composition: bool) -> tuple[str, ...]:
        return expression_variables(params=self._policy.param_kind is not None,
                                    authorizer=authorizer,
                                    composition=composition and bool(self._expressions))

    def evaluate(self, expression: str, *, authorizer: bool = True,
                 composition: bool = True) -> Any:
        """The value of `expression`; CelEvalError (or CelCompileError) when it fails."""
        names = self.names(authorizer=authorizer, composition=composition)
        program = cel.compile_expression(expression, variables=names)
        activation = {k: v for k, v in self._base.items() if k in names}
        if "variables" in names:
            activation["variables"] = self._variables_for(expression, seen=())
        return cel.evaluate(program, activation)

    def _variables_for(self, expression: str, *, seen: tuple[str, ...]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in dict.fromkeys(VARIABLE_REFERENCE.findall(expression)):
            if name not in self._expressions or name in seen:
                continue
            if name not in self._values and name not in self._errors:
                self._resolve(name, seen=(*seen, name))
            if name in self._errors:
                raise cel.CelEvalError(self._errors[name])
            values[name] = self._values[name]
        return values

    def _resolve(self, name: str, *, seen: tuple[str, ...]) -> None:
        expression = self._expressions[name]
        names = self.names(authorizer=True, composition=True)
        try:
            program = cel.compile_expression(expression, variables=names)
            activation = {k: v for k, v in self._base.items() if k in names}
            activation["variables"] = self._variables_for(expression, seen=seen)
            self._values[name] = cel.evaluate(program, activation)
        except (cel.CelEvalError, cel.CelCompileError) as err:
            self._errors[name] = str(err)


def _on_error(policy: Policy, message: str) -> Decision:
    return Decision("admit") if policy.ignores_failures else Decision("deny", message)


def _conditions_hold(policy: Policy, scope: _Scope) -> Decision | bool:
    """True when every matchCondition holds, False when one is false, a Decision when
    some failed to evaluate (and none is false)."""
    errors = []
    for _name, expression in policy.match_conditions:
        try:
            result = scope.evaluate(expression, composition=False)
        except (cel.CelEvalError, cel.CelCompileError) as err:
            errors.append(_error_text(expression, err))
            continue
        if result is False:
            return False
    if not errors:
        return True
    return _on_error(policy, errors[0] if len(errors) == 1 else
                     "[" + ", ".join(errors) + "]")


def _message(scope: _Scope, expression: str) -> str:
    """A messageExpression's message, or "" (a failure, a non-string, a blank, too long or
    multi-line message falls back to `message`)."""
    try:
        value = scope.evaluate(expression, authorizer=False)
    except (cel.CelEvalError, cel.CelCompileError) as err:
        log.info("messageExpression failed", extra={"expression": expression,
                                                    "error": str(err)})
        return ""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    if len(text.encode()) > MAX_MESSAGE_BYTES or "\n" in text:
        return ""
    return text


def evaluate_policy(policy: Policy, inputs: Inputs, params: Any) -> Evaluation:
    """The decisions of `policy` for one request and one param object (None when the
    binding has none)."""
    scope = _Scope(policy, inputs, params)
    result = Evaluation()
    held = _conditions_hold(policy, scope)
    if held is False:
        return result
    if isinstance(held, Decision):
        result.decisions.append(held)
        return result
    for validation in policy.validations:
        try:
            value = scope.evaluate(validation.expression)
        except (cel.CelEvalError, cel.CelCompileError) as err:
            result.decisions.append(_on_error(policy, _error_text(validation.expression, err)))
            continue
        if value is True:
            result.decisions.append(Decision("admit"))
            continue
        message = _message(scope, validation.message_expression) \
            if validation.message_expression else ""
        message = message or validation.message.strip() or \
            f"failed expression: {validation.expression.strip()}"
        result.decisions.append(Decision("deny", message, validation.reason))
    for key, expression in policy.audit_annotations:
        _annotate(policy, scope, key, expression, result)
    return result


def _annotate(policy: Policy, scope: _Scope, key: str, expression: str,
              result: Evaluation) -> None:
    try:
        value = scope.evaluate(expression.strip())
    except (cel.CelEvalError, cel.CelCompileError) as err:
        if not policy.ignores_failures:
            result.annotation_denials.append(_error_text(expression.strip(), err))
        return
    if value is None:
        return
    if not isinstance(value, str):  # denies whatever failurePolicy says, as in Kubernetes
        result.annotation_denials.append(
            f"valueExpression '{expression}' resulted in unsupported return type: "
            f"{type(value).__name__}. Return type must be either string or null.")
        return
    if value.strip():
        result.annotations[key] = value.strip()
