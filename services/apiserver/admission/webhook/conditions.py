"""A webhook's `matchConditions` (Kubernetes' `webhook/matchconditions`): CEL expressions
over `object`, `oldObject` and `request` that must all be true for the webhook to be
called. A false one skips the webhook whatever the others say; when none is false but some
failed to evaluate, failurePolicy decides — Fail refuses the request (403), Ignore skips
the webhook. Expressions are compiled once (skiff.api.cel caches them).
"""

from __future__ import annotations

from typing import Any

from skiff.api import cel
from skiff.api.errors import ApiError
from skiff.api.groups.webhookconfigs import MATCH_CONDITION_VARIABLES
from skiff.apiserver.admission.webhook.hooks import Hook
from skiff.apiserver.admission.webhook.matching import Invocation, Request
from skiff.apiserver.admission.webhook.review import admission_review
from skiff.apiserver.auth.context import current_user


class ConditionEvaluator:
    """Evaluates match conditions (skiff.api.cel keeps the compiled programs)."""

    def matches(self, hook: Hook, invocation: Invocation, req: Request) -> bool:
        """True when every condition holds; raises ApiError (Forbidden) when one failed to
        evaluate, none is false and the hook's failurePolicy is Fail."""
        obj, old = invocation.to_version(req.obj), invocation.to_version(req.old)
        _, review = admission_review(req, invocation, user=current_user.get(), obj=obj,
                                     old=old)
        request = {k: v for k, v in review["request"].items()
                   if k not in ("object", "oldObject")}
        activation: dict[str, Any] = {"object": obj, "oldObject": old, "request": request}
        errors: list[str] = []
        for _name, expression in hook.match_conditions:
            try:
                program = cel.compile_expression(expression,
                                                 variables=MATCH_CONDITION_VARIABLES)
                result = cel.evaluate(program, activation)
            except (cel.CelCompileError, cel.CelEvalError) as err:
                errors.append(f"expression '{expression}' resulted in error: {err}")
                continue
            if result is False:
                return False
            if result is not True:
                errors.append(f"expression '{expression}' resulted in error: no such "
                              "overload")
        if not errors:
            return True
        if hook.ignores_failures:
            return False
        why = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ApiError.forbidden(req.info.resource, req.name, why, group=req.info.group)
