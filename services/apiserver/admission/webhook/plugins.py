"""The MutatingAdmissionWebhook and ValidatingAdmissionWebhook admission plugins
(Kubernetes' `webhook/mutating` and `webhook/validating` dispatchers).

Mutating webhooks run one after another in configuration-name order; each JSON patch is
applied to the object (in the version the webhook was sent, converted back), the result
defaulted, and after the pass the changed object is validated again. A webhook with
`reinvocationPolicy: IfNeeded` is called once more when a webhook after it changed the
object. Validating webhooks are called in parallel; the first refusal (in hook order) is
the answer. A call that fails (connection, TLS, timeout, an invalid response) is ignored
under `failurePolicy: Ignore` and refuses the request under `Fail` with Kubernetes'
`Internal error occurred: failed calling webhook "<name>": ...`. On a dry run a webhook
whose sideEffects are not None/NoneOnDryRun is not called and the request is refused.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import jsonpatch

from skiff.api import apply_defaults
from skiff.api.errors import ApiError
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.admission.webhook.client import Caller, CallFailed
from skiff.apiserver.admission.webhook.conditions import ConditionEvaluator
from skiff.apiserver.admission.webhook.hooks import Hook, hooks_of
from skiff.apiserver.admission.webhook.matching import (
    Invocation,
    Request,
    internal_error,
    should_call,
)
from skiff.apiserver.admission.webhook.review import (
    CallingWebhookError,
    Response,
    admission_review,
    denied,
    dry_run_unsupported,
    verify_response,
)
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.storage.lookups import Lookup

log = logging.getLogger(__name__)

NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")


class WebhookSource:
    """The hooks of one kind of configuration, read from the watch-fed lookup (so a
    configuration written a moment ago applies to the next request) and parsed again only
    when a configuration changed."""

    def __init__(self, configurations: Lookup, *, mutating: bool) -> None:
        self._configurations = configurations
        self._mutating = mutating
        self._key: tuple[tuple[str, str], ...] = ()
        self._hooks: list[Hook] = []

    async def hooks(self) -> list[Hook]:
        configs = await self._configurations.values()
        key = tuple(sorted((str(c["metadata"]["name"]),
                            str(c["metadata"].get("resourceVersion", ""))) for c in configs))
        if key != self._key:
            self._hooks = hooks_of(configs, mutating=self._mutating)
            self._key = key
        return self._hooks


def request_of(attrs: Attributes) -> Request:
    """The predicates' view of one admission: names from the object (the old one for a
    delete)."""
    source = attrs.obj if attrs.obj else attrs.old
    meta: Mapping[str, Any] = (source or {}).get("metadata") or {}
    return Request(info=attrs.info, operation=str(attrs.operation),
                   namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                   obj=attrs.obj if attrs.obj else None, old=attrs.old,
                   subresource=attrs.subresource, dry_run=attrs.dry_run)


class _WebhookPlugin(Plugin):
    """What both plugins share: the hooks, the namespaces, the call and its verdicts."""

    mutating: ClassVar[bool] = False
    operations = frozenset(Operation)

    def __init__(self, source: WebhookSource, *, namespaces: Lookup, caller: Caller,
                 conditions: ConditionEvaluator | None = None) -> None:
        self._source = source
        self._namespaces = namespaces
        self._caller = caller
        self._conditions = conditions or ConditionEvaluator()

    async def _labels_of(self, namespace: str) -> Mapping[str, str] | None:
        ns = await self._namespaces.get(namespace)
        if ns is None:
            return None
        return (ns.get("metadata") or {}).get("labels") or {}

    async def _invocations(self, req: Request) -> list[Invocation]:
        if req.exempt:
            return []
        found = []
        for hook in await self._source.hooks():
            invocation = await should_call(hook, req, labels_of=self._labels_of,
                                           conditions=self._conditions.matches)
            if invocation is not None:
                found.append(invocation)
        return found

    async def _ask(self, invocation: Invocation, req: Request, obj: Obj | None
                   ) -> Response | None:
        """One call; None when it failed and the hook's failurePolicy is Ignore."""
        hook = invocation.hook
        if req.dry_run and hook.side_effects not in NO_SIDE_EFFECTS:
            if hook.side_effects is None:
                self._failed(hook, "Webhook SideEffects is nil")
                return None
            raise dry_run_unsupported(hook.name)
        uid, review = admission_review(req, invocation, user=current_user.get(),
                                       obj=invocation.to_version(obj),
                                       old=invocation.to_version(req.old))
        try:
            answer = await self._caller(hook, review)
        except CallFailed as err:
            self._failed(hook, f"failed to call webhook: {err}")
            return None
        try:
            return verify_response(uid, answer, mutating=self.mutating)
        except ValueError as err:
            self._failed(hook, f"received invalid webhook response: {err}")
            return None

    def _failed(self, hook: Hook, reason: str) -> None:
        error = CallingWebhookError(hook.name, reason)
        if not hook.ignores_failures:
            log.warning("failed calling webhook, failing closed",
                        extra={"webhook": hook.name, "error": str(error)})
            raise internal_error(str(error))
        log.warning("failed calling webhook, failing open",
                    extra={"webhook": hook.name, "error": str(error)})


class MutatingWebhookAdmission(_WebhookPlugin):
    """MutatingAdmissionWebhook: last of the mutating plugins."""

    name = "MutatingAdmissionWebhook"
    mutating = True

    async def admit(self, attrs: Attributes) -> list[str]:
        if request_of(attrs).exempt:
            return []
        hooks = await self._source.hooks()
        warnings: list[str] = []
        reinvocable: list[str] = []  # IfNeeded hooks called since the last change
        to_reinvoke: set[str] = set()
        changed_any = False
        for hook in hooks:
            # each hook is matched against the object as the hooks before it left it
            invocation = await self._invocation(hook, attrs)
            if invocation is None:
                continue
            changed = await self._mutate(invocation, attrs, warnings)
            if changed:
                changed_any = True
                to_reinvoke.update(reinvocable)
                reinvocable.clear()
            if hook.reinvocation_policy == "IfNeeded":
                reinvocable.append(hook.uid)
        for hook in hooks:  # one more round (Kubernetes' reinvocation)
            if hook.uid in to_reinvoke:
                invocation = await self._invocation(hook, attrs)
                if invocation is not None:
                    changed_any |= await self._mutate(invocation, attrs, warnings)
        if changed_any:
            attrs.revalidate(attrs.obj)
        return warnings

    async def _invocation(self, hook: Hook, attrs: Attributes) -> Invocation | None:
        return await should_call(hook, request_of(attrs), labels_of=self._labels_of,
                                 conditions=self._conditions.matches)

    async def _mutate(self, invocation: Invocation, attrs: Attributes,
                      warnings: list[str]) -> bool:
        """Call one hook and apply its patch to `attrs.obj` in place; whether it changed."""
        hook = invocation.hook
        response = await self._ask(invocation, request_of(attrs), attrs.obj)
        if response is None:
            return False
        warnings += response.warnings
        if not response.allowed:
            raise denied(hook.name, response.result)
        if not response.patch:
            return False
        try:
            patch = jsonpatch.JsonPatch.from_string(response.patch.decode("utf-8", "replace"))
        except (jsonpatch.JsonPatchException, ValueError):
            self._failed(hook, "received undecodable patch in webhook response: not a JSON "
                               "patch (a list of operations)")
            return False
        if not patch.patch:
            return False
        sent = invocation.to_version(attrs.obj) if attrs.obj else None
        if sent is None:
            raise internal_error(f'admission webhook "{hook.name}" attempted to modify the '
                                 "object, which is not supported for this operation")
        patched = _apply(patch, sent)
        if not isinstance(patched, dict):
            raise internal_error("the patched object is not an object")
        new = invocation.from_version(patched, attrs.info)
        apply_defaults(new)
        if new == attrs.obj:
            return False
        attrs.obj.clear()
        attrs.obj.update(new)
        return True


def _apply(patch: jsonpatch.JsonPatch, doc: Obj) -> Any:
    """The patched copy of `doc`; an operation that does not apply is an InternalError
    worded as Kubernetes' JSON patch library words it (not jsonpatch's, which quotes the
    whole document)."""
    result: Any = copy.deepcopy(doc)
    for op in patch.patch:
        try:
            result = jsonpatch.JsonPatch([op]).apply(result, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
            kind, path = str(op.get("op", "")), str(op.get("path", ""))
            if kind == "test":
                raise internal_error(f"testing value {path} failed: test failed") from None
            raise internal_error(f'{kind} operation does not apply: doc is missing path: '
                                 f'"{path}": missing value') from None
    return result


class ValidatingWebhookAdmission(_WebhookPlugin):
    """ValidatingAdmissionWebhook: last of the validating plugins but ResourceQuota."""

    name = "ValidatingAdmissionWebhook"

    async def validate(self, attrs: Attributes) -> list[str]:
        req = request_of(attrs)
        invocations = await self._invocations(req)
        if not invocations:
            return []
        results = await asyncio.gather(
            *(self._ask(i, req, attrs.obj if attrs.obj else None) for i in invocations),
            return_exceptions=True)
        warnings: list[str] = []
        first: ApiError | None = None
        for invocation, result in zip(invocations, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, ApiError):
                    raise result
                first = first or result
                continue
            if result is None:
                continue
            warnings += result.warnings
            if not result.allowed:
                first = first or denied(invocation.hook.name, result.result)
        if first is not None:
            raise first
        return warnings
