"""Access reviews (SPEC AX5): `SelfSubjectAccessReview` (authorization.k8s.io/v1,
`kubectl auth can-i`), `SelfSubjectRulesReview` (`kubectl auth can-i --list`) and
`SelfSubjectReview` (authentication.k8s.io/v1, `kubectl auth
whoami`).

The answers come from the apiserver's own authorizer chain (system:masters, Node, RBAC:
`skiff.apiserver.authz`) for the caller the request authenticated as; in the insecure mode
`ALLOW_ALL` allows everything and says so in the reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from skiff.api import ApiError
from skiff.api.errors import FieldError
from skiff.auth import Attributes, AuthorizationResult, Authorizer, Decision, UserInfo

Obj = dict[str, Any]

AUTHORIZATION_GV = "authorization.k8s.io/v1"
AUTHENTICATION_GV = "authentication.k8s.io/v1"
GROUP_VERSIONS = (AUTHORIZATION_GV, AUTHENTICATION_GV)

# Who every caller is in the insecure mode (`skiff up --insecure`): nobody is authenticated.
ANONYMOUS_ADMIN = UserInfo(name="skiff-admin", groups=("system:masters", "system:authenticated"))


class RulesResolver(Protocol):
    """Optional: what `user` may do in `namespace` (`kubectl auth can-i --list`), as a
    SubjectRulesReviewStatus (`resourceRules`, `nonResourceRules`, `incomplete`)."""

    async def rules_for(self, user: UserInfo, namespace: str) -> Obj: ...


class AllowAll:
    """The insecure mode's authorizer: everything is allowed, and the reason says so."""

    REASON = "Skiff runs insecure (--insecure): every request is allowed"

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        return AuthorizationResult(Decision.ALLOW, self.REASON)

    async def rules_for(self, user: UserInfo, namespace: str) -> Obj:
        return {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False, "evaluationError": self.REASON}


ALLOW_ALL = AllowAll()


def _attributes(user: UserInfo, attributes: Obj) -> Attributes:
    """A review's resourceAttributes / nonResourceAttributes as the authorizer's input."""
    return Attributes(
        user=user, verb=str(attributes.get("verb") or ""),
        resource=str(attributes.get("resource") or ""),
        subresource=str(attributes.get("subresource") or ""),
        namespace=str(attributes.get("namespace") or ""),
        name=str(attributes.get("name") or ""),
        api_group=str(attributes.get("group") or ""), path=str(attributes.get("path") or ""))


def resource_list(group_version: str) -> Obj:
    served = ([("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
               ("selfsubjectrulesreviews", "SelfSubjectRulesReview")]
              if group_version == AUTHORIZATION_GV
              else [("selfsubjectreviews", "SelfSubjectReview")])
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": name, "singularName": kind.lower(), "namespaced": False,
                           "kind": kind, "verbs": ["create"]} for name, kind in served]}


async def review(group_version: str, resource: str, body: Obj, *, authorizer: Authorizer,
                 user: UserInfo) -> Obj:
    """POST of a review: the same object back with its `status` filled in."""
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectaccessreviews"):
        spec = body.get("spec") or {}
        attributes = spec.get("resourceAttributes") or spec.get("nonResourceAttributes")
        if not isinstance(attributes, dict):
            raise ApiError.invalid("SelfSubjectAccessReview", "", [_required_attributes()],
                                   group="authorization.k8s.io")
        result = await authorizer.authorize(_attributes(user, attributes))
        status: Obj = {"allowed": result.allowed}
        if result.decision is Decision.DENY and result.reason:
            status["denied"] = True  # an explicit denial, not just nobody allowing it
        if result.reason:
            status["reason"] = result.reason
        return {"kind": "SelfSubjectAccessReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectrulesreviews"):
        spec = body.get("spec") or {}
        rules = getattr(authorizer, "rules_for", None)
        status = (await rules(user, str(spec.get("namespace") or "")) if rules else
                  {"resourceRules": [], "nonResourceRules": [], "incomplete": True,
                   "evaluationError": "this authorizer cannot list rules"})
        return {"kind": "SelfSubjectRulesReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    if (group_version, resource) == (AUTHENTICATION_GV, "selfsubjectreviews"):
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = {key: list(values) for key, values in user.extra.items()}
        return {"kind": "SelfSubjectReview", "apiVersion": AUTHENTICATION_GV,
                "metadata": {"creationTimestamp": datetime.now(UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ")}, "status": {"userInfo": info}}
    raise ApiError.not_found(resource, "")


def _required_attributes() -> FieldError:
    return FieldError("spec.resourceAttributes", "Invalid value",
                      "exactly one of nonResourceAttributes or resourceAttributes must be "
                      "specified", [])
