"""Access reviews (SPEC AX5): `SelfSubjectAccessReview` (authorization.k8s.io/v1,
`kubectl auth can-i`), `SelfSubjectRulesReview` (`kubectl auth can-i --list`) and
`SelfSubjectReview` (authentication.k8s.io/v1, `kubectl auth
whoami`).

The seam: an `Authorizer` answers `authorize(user, attributes)`. Until Skiff knows who is
calling (the identity work of issue 14), `ALLOW_ALL` allows everything and says so in the
reason; the identity work installs the real authorizer with `KubeApi(..., authorizer=...)`
and fills `UserInfo` from the request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from skiff.api import ApiError
from skiff.api.errors import FieldError

Obj = dict[str, Any]

AUTHORIZATION_GV = "authorization.k8s.io/v1"
AUTHENTICATION_GV = "authentication.k8s.io/v1"
GROUP_VERSIONS = (AUTHORIZATION_GV, AUTHENTICATION_GV)


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)


# Who every caller is while Skiff has no authentication.
ANONYMOUS_ADMIN = UserInfo("skiff-admin", ("system:masters", "system:authenticated"))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    denied: bool = False


class Authorizer(Protocol):
    """Kubernetes' authorizer.Authorizer: may `user` do what `attributes` describe?
    `attributes` is a SelfSubjectAccessReview's `resourceAttributes` or
    `nonResourceAttributes` (verb, group, resource, subresource, namespace, name, path)."""

    def authorize(self, user: UserInfo, attributes: Obj) -> Decision: ...


class RulesResolver(Protocol):
    """Optional: what `user` may do in `namespace` (`kubectl auth can-i --list`), as a
    SubjectRulesReviewStatus (`resourceRules`, `nonResourceRules`, `incomplete`)."""

    def rules_for(self, user: UserInfo, namespace: str) -> Obj: ...


class AllowAll:
    def authorize(self, user: UserInfo, attributes: Obj) -> Decision:
        return Decision(True, "Skiff has no authorization yet: every request is allowed")

    def rules_for(self, user: UserInfo, namespace: str) -> Obj:
        return {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
                "evaluationError": "Skiff has no authorization yet: every request is "
                                   "allowed"}


ALLOW_ALL = AllowAll()


def resource_list(group_version: str) -> Obj:
    served = ([("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
               ("selfsubjectrulesreviews", "SelfSubjectRulesReview")]
              if group_version == AUTHORIZATION_GV
              else [("selfsubjectreviews", "SelfSubjectReview")])
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": name, "singularName": kind.lower(), "namespaced": False,
                           "kind": kind, "verbs": ["create"]} for name, kind in served]}


def review(group_version: str, resource: str, body: Obj, *, authorizer: Authorizer,
           user: UserInfo) -> Obj:
    """POST of a review: the same object back with its `status` filled in."""
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectaccessreviews"):
        spec = body.get("spec") or {}
        attributes = spec.get("resourceAttributes") or spec.get("nonResourceAttributes")
        if not isinstance(attributes, dict):
            raise ApiError.invalid("SelfSubjectAccessReview", "", [_required_attributes()],
                                   group="authorization.k8s.io")
        decision = authorizer.authorize(user, attributes)
        status: Obj = {"allowed": decision.allowed}
        if decision.denied:
            status["denied"] = True
        if decision.reason:
            status["reason"] = decision.reason
        return {"kind": "SelfSubjectAccessReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectrulesreviews"):
        spec = body.get("spec") or {}
        rules = getattr(authorizer, "rules_for", None)
        status = (rules(user, str(spec.get("namespace") or "")) if rules else
                  {"resourceRules": [], "nonResourceRules": [], "incomplete": True,
                   "evaluationError": "this authorizer cannot list rules"})
        return {"kind": "SelfSubjectRulesReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    if (group_version, resource) == (AUTHENTICATION_GV, "selfsubjectreviews"):
        info: Obj = {"username": user.username, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = user.extra
        return {"kind": "SelfSubjectReview", "apiVersion": AUTHENTICATION_GV,
                "metadata": {"creationTimestamp": datetime.now(UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ")}, "status": {"userInfo": info}}
    raise ApiError.not_found(resource, "")


def _required_attributes() -> FieldError:
    return FieldError("spec.resourceAttributes", "Invalid value",
                      "exactly one of nonResourceAttributes or resourceAttributes must be "
                      "specified", [])
