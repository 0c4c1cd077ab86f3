"""Which webhooks a request calls (Kubernetes' `generic.Webhook.ShouldCallHook` and its
predicates): the namespaceSelector against the labels of the request's namespace (a
cluster-scoped object is selected by it only when it is a Namespace), the objectSelector
against the new or the old object's labels, the rules (operations, API groups, versions,
resources with `*` and `*/status`-style subresources, scope), matchPolicy Equivalent (a
kind served in other versions — events.k8s.io/v1 Events, autoscaling/v1
HorizontalPodAutoscalers — matches a rule naming any of them, and the webhook is sent the
object in that version) and the CEL matchConditions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.errors import ApiError, Reason
from skiff.api.groups import autoscaling
from skiff.api.groups import events as eventsv1
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.hooks import Hook

Convert = Callable[[Mapping[str, Any]], Obj]
# (kind, served version) -> (from the stored version, back to it)
_CONVERSIONS: dict[tuple[str, str], tuple[Convert, Convert]] = {
    ("HorizontalPodAutoscaler", autoscaling.V1): (autoscaling.to_v1, autoscaling.to_v2),
    ("Event", eventsv1.V1): (eventsv1.to_v1, eventsv1.to_core),
}

# The configurations themselves are never sent to webhooks (a webhook could lock itself in).
EXEMPT_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                          "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                          "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"})


@dataclass(frozen=True)
class Request:
    """What the predicates read of one admission request (the stored version's kind)."""

    info: KindInfo
    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    subresource: str = ""
    dry_run: bool = False

    @property
    def exempt(self) -> bool:
        return self.info.group == "admissionregistration.k8s.io" and \
            self.info.kind in EXEMPT_KINDS


@dataclass(frozen=True)
class Invocation:
    """A hook that applies, and the kind/resource version the webhook is sent."""

    hook: Hook
    info: KindInfo  # the version the rule matched (the stored one, or an equivalent)

    def to_version(self, obj: Obj | None) -> Obj | None:
        """`obj` (stored version) in the version the webhook is sent."""
        if obj is None or self.info.api_version == obj.get("apiVersion"):
            return obj
        convert = _CONVERSIONS.get((self.info.kind, self.info.api_version))
        return convert[0](obj) if convert else {**obj, "apiVersion": self.info.api_version}

    def from_version(self, obj: Obj, stored: KindInfo) -> Obj:
        """A patched `obj` of the sent version back in the stored version."""
        if obj.get("apiVersion") == stored.api_version:
            return obj
        convert = _CONVERSIONS.get((self.info.kind, self.info.api_version))
        return convert[1](obj) if convert else {**obj, "apiVersion": stored.api_version}


def _exact_or_wildcard(items: Any, wanted: str) -> bool:
    return isinstance(items, list) and any(i == "*" or i == wanted for i in items)


def rule_matches(rule: Mapping[str, Any], req: Request, info: KindInfo) -> bool:
    """`rules.Matcher.Matches` for the request seen as `info` (its kind in some version)."""
    scope = rule.get("scope") or "*"
    is_namespace = info.resource == "namespaces" and info.group == ""
    if scope == "Namespaced" and (is_namespace or not req.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not req.namespace):
        return False
    if scope not in ("*", "Namespaced", "Cluster"):
        return False
    if not _exact_or_wildcard(rule.get("operations"), req.operation):
        return False
    if not _exact_or_wildcard(rule.get("apiGroups"), info.group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions"), info.version):
        return False
    for res_sub in rule.get("resources") or []:
        res, _, sub = str(res_sub).partition("/")
        if res in ("*", info.resource) and sub in ("*", req.subresource):
            return True
    return False


def matching_version(hook: Hook, req: Request) -> KindInfo | None:
    """The version of the request's kind a rule of `hook` matches: the stored one first, then
    (matchPolicy Equivalent) the others it is served in, earlier rules first."""
    for rule in hook.rules:
        if rule_matches(rule, req, req.info):
            return req.info
    if hook.match_policy != "Equivalent":
        return None
    others = [i for i in req.info.served() if i.api_version != req.info.api_version]
    for rule in hook.rules:
        for other in others:
            if rule_matches(rule, req, other):
                return other
    return None


def _labels(obj: Obj | None) -> Mapping[str, str] | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


def object_selected(hook: Hook, req: Request) -> bool:
    """`object.Matcher`: the selector against the new object's labels or the old one's."""
    if hook.object_selector.empty:
        return True
    return any(labels is not None and hook.object_selector.matches(labels)
               for labels in (_labels(req.obj), _labels(req.old)))


NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str] | None]]


async def namespace_selected(hook: Hook, req: Request, labels_of: NamespaceLabels) -> bool:
    """`namespace.Matcher`: a cluster-scoped object other than a Namespace is always
    selected; a Namespace being created or updated by its own labels; anything else by its
    namespace's labels (a namespace that does not exist is a 404, as in Kubernetes)."""
    is_namespace = req.info.resource == "namespaces" and req.info.group == ""
    if not req.namespace and not is_namespace:
        return True
    if hook.namespace_selector.empty:
        return True
    if is_namespace and not req.subresource and req.operation in ("CREATE", "UPDATE"):
        return hook.namespace_selector.matches(_labels(req.obj))
    namespace = req.namespace or req.name
    labels = await labels_of(namespace)
    if labels is None:
        raise ApiError.not_found("namespaces", namespace)
    return hook.namespace_selector.matches(labels)


MatchConditions = Callable[[Hook, Invocation, Request], bool]


async def should_call(hook: Hook, req: Request, *, labels_of: NamespaceLabels,
                      conditions: MatchConditions) -> Invocation | None:
    """The invocation when `hook` applies to `req`, None when it does not; ApiError when
    deciding fails (unknown namespace, a bad selector, a failing matchCondition)."""
    ns_error: ApiError | None = None
    try:
        if not await namespace_selected(hook, req, labels_of):
            return None
    except ApiError as err:
        ns_error = err
    if not object_selected(hook, req):
        return None
    info = matching_version(hook, req)
    if info is None:
        return None
    if ns_error is not None:
        raise ns_error
    if hook.selector_error is not None:
        raise hook.selector_error
    invocation = Invocation(hook, info)
    if hook.match_conditions and not conditions(hook, invocation, req):
        return None
    return invocation


def internal_error(message: str) -> ApiError:
    """apierrors.NewInternalError: `Internal error occurred: <message>`."""
    return ApiError(Reason.INTERNAL_ERROR, f"Internal error occurred: {message}")
