"""Whether a policy's `matchConstraints` or a binding's `matchResources` select a request
(Kubernetes' `policy/matching`): the namespaceSelector and objectSelector, then
`excludeResourceRules`, then `resourceRules` (with `resourceNames`, and matchPolicy
Equivalent) — the predicates are the admission webhooks' own (`webhook.matching`), a
policy's criteria being read as a webhook's rules and selectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.errors import ApiError
from skiff.api.kinds import KindInfo
from skiff.api.types import ObjView
from skiff.apiserver.admission.webhook.hooks import Hook, hook_of
from skiff.apiserver.admission.webhook.matching import (
    NamespaceLabels,
    Request,
    matching_version,
    namespace_selected,
    object_selected,
)

# The resources no API-based policy is applied to (a policy could lock itself in).
POLICY_RESOURCES = frozenset({"validatingadmissionpolicies",
                              "validatingadmissionpolicybindings",
                              "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})


def exempt(info: KindInfo) -> bool:
    return info.group == "admissionregistration.k8s.io" and info.resource in POLICY_RESOURCES


def _named_rules(rules: Any, name: str) -> list[ObjView]:
    """The rules that apply to an object called `name` (no resourceNames, or it is one)."""
    return [r for r in rules or [] if isinstance(r, Mapping)
            and (not r.get("resourceNames") or name in r["resourceNames"])]


def _as_hook(criteria: ObjView, rules: list[ObjView]) -> Hook:
    return hook_of("policy", 0, {
        "namespaceSelector": criteria.get("namespaceSelector") or {},
        "objectSelector": criteria.get("objectSelector") or {},
        "matchPolicy": criteria.get("matchPolicy") or "Equivalent",
        "rules": rules}, mutating=False)


async def criteria_match(criteria: ObjView, req: Request, *, labels_of: NamespaceLabels
                         ) -> KindInfo | None:
    """The version of the request's kind the criteria match it as (the stored one when they
    name no resources), None when they do not match; ApiError when deciding fails (a
    namespace that does not exist, a selector that cannot be parsed)."""
    hook = _as_hook(criteria, _named_rules(criteria.get("resourceRules"), req.name))
    ns_error: ApiError | None = None
    try:
        if not await namespace_selected(hook, req, labels_of):
            return None
    except ApiError as err:  # raised below, if the rules match
        ns_error = err
    if not object_selected(hook, req):
        return None
    excluded = _named_rules(criteria.get("excludeResourceRules"), req.name)
    if excluded and matching_version(_as_hook(criteria, excluded), req) is not None:
        return None
    info = matching_version(hook, req) if criteria.get("resourceRules") else req.info
    if info is None:
        return None
    if ns_error is not None:
        raise ns_error
    if hook.selector_error is not None:
        raise hook.selector_error
    return info
