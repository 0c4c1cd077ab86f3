"""The ValidatingAdmissionPolicy admission plugin (Kubernetes' `policy/validating`
dispatcher), between the mutating and the validating webhooks in the chain.

For every write (create, update, delete) each policy whose matchConstraints select the
request is evaluated once per binding whose matchResources select it too, and per param
object the binding refers to (paramRef by name or selector; none found and
parameterNotFoundAction Deny is a configuration error). A failed validation acts as the
binding's validationActions say: Deny refuses the request —
`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding
'<binding>' denied request: <message>`, 422 Invalid unless the validation names another
reason — Warn adds a response warning, Audit is logged (Skiff has no audit backend). A
configuration error (an unknown paramKind, a missing param, a bad selector) is ignored under
failurePolicy Ignore and refuses the request under Fail. The policies and bindings
themselves are never subject to policies.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.errors import ApiError, FieldError, Reason
from skiff.api.kinds import KindInfo
from skiff.api.selectors import LabelSelector
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.admission.policy.evaluation import Evaluation, Inputs, evaluate_policy
from skiff.apiserver.admission.policy.matching import criteria_match, exempt
from skiff.apiserver.admission.policy.source import (
    Binding,
    ParamKindUnknown,
    ParamSource,
    Policy,
    PolicySource,
)
from skiff.apiserver.admission.webhook.hooks import hook_of
from skiff.apiserver.admission.webhook.matching import Invocation, Request
from skiff.apiserver.admission.webhook.plugins import request_of
from skiff.apiserver.admission.webhook.review import admission_review
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.storage.lookups import Lookup

log = logging.getLogger(__name__)

# what Kubernetes' CreateNamespaceObject keeps of the namespace's metadata
_NAMESPACE_META = ("name", "generateName", "namespace", "labels", "annotations", "uid",
                   "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                   "generation", "resourceVersion", "finalizers")


class ConfigurationError(Exception):
    """A binding (or its policy) that cannot be applied to this request."""


@dataclass(frozen=True)
class Denial:
    policy: str
    binding: str | None
    message: str
    reason: str = ""

    def error(self, req: Request) -> ApiError:
        """`admission.NewForbidden` with the decision's reason (Invalid by default)."""
        if self.binding is None:
            why = f"ValidatingAdmissionPolicy '{self.policy}' denied request: {self.message}"
        else:
            why = (f"ValidatingAdmissionPolicy '{self.policy}' with binding '{self.binding}' "
                   f"denied request: {self.message}")
        forbidden = ApiError.forbidden(req.info.resource, req.name or "Unknown", why,
                                       group=req.info.group)
        try:
            reason = Reason(self.reason or Reason.INVALID)
        except ValueError:
            reason = Reason.INVALID
        # the denial again as a cause with no field: kubectl prints an Invalid one as
        # `The deployments "x" is invalid: : ValidatingAdmissionPolicy ...`
        return ApiError(reason, forbidden.message, [FieldError("", "", why)],
                        name=forbidden.name, group=forbidden.group, kind=forbidden.kind)


class ValidatingAdmissionPolicyAdmission(Plugin):
    """ValidatingAdmissionPolicy: after the mutating plugins, before the validating
    webhooks."""

    name = "ValidatingAdmissionPolicy"
    operations = frozenset(Operation)

    def __init__(self, source: PolicySource, *, namespaces: Lookup,
                 params: ParamSource) -> None:
        self._source = source
        self._namespaces = namespaces
        self._params = params

    async def _labels_of(self, namespace: str) -> Mapping[str, str] | None:
        ns = await self._namespaces.get(namespace)
        if ns is None:
            return None
        return (ns.get("metadata") or {}).get("labels") or {}

    async def validate(self, attrs: Attributes) -> list[str]:
        if exempt(attrs.info):
            return []
        hooks = await self._source.hooks()
        if not hooks:
            return []
        req = request_of(attrs)
        denials: list[Denial] = []
        warnings: list[str] = []
        for hook in hooks:
            policy = hook.policy
            try:
                info = await criteria_match(policy.match_constraints, req,
                                            labels_of=self._labels_of)
                if info is None:
                    continue
                param_info = self._params.resolve(*policy.param_kind) \
                    if policy.param_kind is not None else None
            except (ApiError, ParamKindUnknown) as err:
                self._configuration_error(denials, policy, None, _text(err))
                continue
            inputs: Inputs | None = None
            for binding in hook.bindings:
                try:
                    if binding.match_resources is not None and await criteria_match(
                            binding.match_resources, req, labels_of=self._labels_of) is None:
                        continue
                    params = await self._collect_params(policy, param_info, binding, req)
                except (ApiError, ConfigurationError) as err:
                    self._configuration_error(denials, policy, binding, _text(err))
                    continue
                if params and inputs is None:
                    inputs = await self._inputs(req, info)
                for param in params:
                    assert inputs is not None
                    self._act(policy, binding, evaluate_policy(policy, inputs, param),
                              denials=denials, warnings=warnings)
        if denials:
            raise denials[0].error(req)
        return warnings

    def _act(self, policy: Policy, binding: Binding, evaluation: Evaluation, *,
             denials: list[Denial], warnings: list[str]) -> None:
        """A binding's validationActions applied to one evaluation's decisions."""
        for index, decision in enumerate(evaluation.decisions):
            if decision.action != "deny":
                continue
            for action in binding.actions:
                if action == "Deny":
                    denials.append(Denial(policy.name, binding.name, decision.message,
                                          decision.reason))
                elif action == "Warn":
                    warnings.append(f"Validation failed for ValidatingAdmissionPolicy "
                                    f"'{policy.name}' with binding '{binding.name}': "
                                    f"{decision.message}")
                elif action == "Audit":
                    log.warning("validation failed", extra={
                        "annotation": "validation.policy.admission.k8s.io/"
                                      "validation_failure",
                        "value": json.dumps([{
                            "message": decision.message, "policy": policy.name,
                            "binding": binding.name, "expressionIndex": index,
                            "validationActions": list(binding.actions)}])})
        denials.extend(Denial(policy.name, binding.name, message)
                       for message in evaluation.annotation_denials)
        for key, value in evaluation.annotations.items():
            log.info("audit annotation", extra={"annotation": f"{policy.name}/{key}",
                                                "value": value})

    @staticmethod
    def _configuration_error(denials: list[Denial], policy: Policy, binding: Binding | None,
                             why: str) -> None:
        if policy.ignores_failures:
            log.info("policy configuration error ignored",
                     extra={"policy": policy.name, "error": why})
            return
        what = "policy" if binding is None else "binding"
        denials.append(Denial(policy.name, binding.name if binding else None,
                              f"failed to configure {what}: {why}"))

    async def _collect_params(self, policy: Policy, info: KindInfo | None, binding: Binding,
                              req: Request) -> list[Any]:
        """`CollectParams`: [None] when the policy or binding uses no params, else the
        param objects found ([] when none and parameterNotFoundAction is Allow)."""
        ref = binding.param_ref
        if info is None or ref is None:
            return [None]
        namespace = ""
        if info.namespaced:
            namespace = str(ref.get("namespace") or req.namespace)
            if not namespace:
                raise ConfigurationError("cannot use namespaced paramRef in policy binding "
                                         "that matches cluster-scoped resources")
        elif ref.get("namespace"):
            raise ConfigurationError("paramRef.namespace must not be provided for a "
                                     "cluster-scoped `paramKind`")
        params: list[Obj]
        if ref.get("name"):
            found = await self._params.get(info, namespace, str(ref["name"]))
            params = [found] if found is not None else []
        elif ref.get("selector") is not None:
            selector = LabelSelector.from_dict(ref["selector"], path="paramRef.selector")
            params = await self._params.select(info, namespace, selector)
        else:
            raise ConfigurationError("one of name or selector must be provided")
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise ConfigurationError("no params found for policy binding with `Deny` "
                                     "parameterNotFoundAction")
        return list(params)

    async def _inputs(self, req: Request, info: KindInfo) -> Inputs:
        """The CEL variables of the request as the policy matched it (`info`'s version)."""
        invocation = Invocation(hook_of("policy", 0, {}, mutating=False), info)
        obj, old = invocation.to_version(req.obj), invocation.to_version(req.old)
        _, review = admission_review(req, invocation, user=current_user.get(), obj=obj,
                                     old=old)
        request = {k: v for k, v in review["request"].items()
                   if k not in ("uid", "object", "oldObject")}
        namespace_object = None
        is_namespace = req.info.kind == "Namespace" and req.info.group == ""
        if req.namespace and not is_namespace:
            ns = await self._namespaces.get(req.namespace)
            if ns is None:
                raise ApiError.not_found("namespaces", req.namespace)
            meta = ns.get("metadata") or {}
            namespace_object = {
                "metadata": {k: meta[k] for k in _NAMESPACE_META if k in meta},
                "spec": ns.get("spec") or {}, "status": ns.get("status") or {}}
        return Inputs(obj=obj, old=old, request=request, namespace=namespace_object)


def _text(err: Exception) -> str:
    return err.message if isinstance(err, ApiError) else str(err)
