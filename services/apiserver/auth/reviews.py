"""Access and token reviews (SPEC AX5): what `kubectl auth can-i` and
`kubectl auth whoami` ask about the caller, and what operators, webhooks and metrics
proxies (kube-rbac-proxy, metrics-server, Vault) ask about someone else.

- `SelfSubjectAccessReview` / `SelfSubjectRulesReview` (authorization.k8s.io/v1) and
  `SelfSubjectReview` (authentication.k8s.io/v1): about the caller.
- `SubjectAccessReview` (cluster-scoped) and `LocalSubjectAccessReview` (namespaced, its
  spec's namespace must be the URL's) ask the authorizer about the user, groups, uid and
  extra in their spec.
- `TokenReview` asks the authenticator about a bearer token (`spec.token`), with
  `spec.audiences` handled as kube-apiserver does (`TokenReviewer`).

The answers come from the apiserver's own authorizer chain (system:masters, Node, RBAC:
`skiff.apiserver.auth.rbac`) and its own bearer-token authenticator; creating any review is
itself authorized by RBAC (`create` on the review resource, as kube-apiserver does; the
bootstrap ClusterRole `system:auth-delegator` grants TokenReviews and SubjectAccessReviews).
In the insecure mode `ALLOW_ALL` allows everything and says so in the reason, and a
TokenReview is returned unanswered, as kube-apiserver does without a token authenticator.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import jwt

from skiff.api import ApiError, Reason
from skiff.api.errors import FieldError, invalid
from skiff.api.types import Obj
from skiff.apiserver.auth.satoken import GetObject, TokenAuthority
from skiff.auth import Attributes, AuthorizationResult, Authorizer, Decision, UserInfo

if TYPE_CHECKING:
    from skiff.apiserver.registry.store import Registry

AUTHORIZATION_GV = "authorization.k8s.io/v1"
AUTHENTICATION_GV = "authentication.k8s.io/v1"
GROUP_VERSIONS = (AUTHORIZATION_GV, AUTHENTICATION_GV)

# (resource, kind, namespaced) of every review each group version serves
_SERVED: dict[str, tuple[tuple[str, str, bool], ...]] = {
    AUTHORIZATION_GV: (("localsubjectaccessreviews", "LocalSubjectAccessReview", True),
                       ("selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
                       ("selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
                       ("subjectaccessreviews", "SubjectAccessReview", False)),
    AUTHENTICATION_GV: (("selfsubjectreviews", "SelfSubjectReview", False),
                        ("tokenreviews", "TokenReview", False)),
}
# kube-apiserver's bearer-token authenticator's answer for a token nobody recognises
INVALID_BEARER_TOKEN = "invalid bearer token"

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
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": name, "singularName": kind.lower(),
                           "namespaced": namespaced, "kind": kind, "verbs": ["create"]}
                          for name, kind, namespaced in _SERVED.get(group_version, ())]}


def route(group_version: str, rest: list[str], *, method: str) -> tuple[str, str | None]:
    """(resource, namespace or None) of a review URL below `/apis/<group_version>/`:
    `<resource>` for the cluster-scoped ones, `namespaces/<ns>/<resource>` for
    LocalSubjectAccessReview. Anything else is kube-apiserver's 404; any method but POST
    its 405."""
    served = {name: namespaced for name, _, namespaced in _SERVED.get(group_version, ())}
    if len(rest) == 1 and served.get(rest[0]) is False:
        resource, namespace = rest[0], None
    elif len(rest) == 3 and rest[0] == "namespaces" and served.get(rest[2]) is True:
        resource, namespace = rest[2], rest[1]
    else:
        raise ApiError(Reason.NOT_FOUND, "the server could not find the requested resource")
    if method != "POST":  # reviews are create-only (`kubectl get tokenreviews`)
        raise ApiError(Reason.METHOD_NOT_ALLOWED,
                       "the server does not allow this method on the requested resource")
    return resource, namespace


async def review(group_version: str, resource: str, body: Obj, *, authorizer: Authorizer,
                 user: UserInfo, namespace: str | None = None,
                 tokens: TokenReviewer | None = None) -> Obj:
    """POST of a review: the same object back with its `status` filled in. `namespace` is
    the URL's (LocalSubjectAccessReview); `tokens` answers TokenReviews (None: the insecure
    mode, where a TokenReview comes back unanswered)."""
    if (group_version, resource) == (AUTHORIZATION_GV, "subjectaccessreviews"):
        return await _subject_access_review(body, authorizer=authorizer)
    if (group_version, resource) == (AUTHORIZATION_GV, "localsubjectaccessreviews"):
        return await _subject_access_review(body, authorizer=authorizer,
                                            namespace=namespace or "")
    if (group_version, resource) == (AUTHENTICATION_GV, "tokenreviews"):
        return await _token_review(body, tokens)
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectaccessreviews"):
        spec = body.get("spec") or {}
        attributes = spec.get("resourceAttributes") or spec.get("nonResourceAttributes")
        if not isinstance(attributes, dict):
            raise ApiError.invalid("SelfSubjectAccessReview", "", [_required_attributes()],
                                   group="authorization.k8s.io")
        result = await authorizer.authorize(_attributes(user, attributes))
        return {"kind": "SelfSubjectAccessReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec,
                "status": _access_status(result)}
    if (group_version, resource) == (AUTHORIZATION_GV, "selfsubjectrulesreviews"):
        spec = body.get("spec") or {}
        rules = getattr(authorizer, "rules_for", None)
        status = (await rules(user, str(spec.get("namespace") or "")) if rules else
                  {"resourceRules": [], "nonResourceRules": [], "incomplete": True,
                   "evaluationError": "this authorizer cannot list rules"})
        return {"kind": "SelfSubjectRulesReview", "apiVersion": AUTHORIZATION_GV,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
    if (group_version, resource) == (AUTHENTICATION_GV, "selfsubjectreviews"):
        return {"kind": "SelfSubjectReview", "apiVersion": AUTHENTICATION_GV,
                "metadata": {"creationTimestamp": datetime.now(UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ")}, "status": {"userInfo": _user_info(user)}}
    raise ApiError.not_found(resource, "")


def _required_attributes() -> FieldError:
    return FieldError("spec.resourceAttributes", "Invalid value",
                      "exactly one of nonResourceAttributes or resourceAttributes must be "
                      "specified", [])


def _user_info(user: UserInfo) -> Obj:
    """An authentication.k8s.io/v1 UserInfo (empty fields left out, as Go's omitempty)."""
    info: Obj = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    return info


def _access_status(result: AuthorizationResult) -> Obj:
    """A SubjectAccessReviewStatus from the authorizer chain's decision."""
    status: Obj = {"allowed": result.allowed}
    if result.decision is Decision.DENY and result.reason:
        status["denied"] = True  # an explicit denial, not just nobody allowing it
    if result.reason:
        status["reason"] = result.reason
    return status


# -- SubjectAccessReview, LocalSubjectAccessReview -------------------------------------------


def _subject(spec: Obj) -> UserInfo:
    """The user a SubjectAccessReview asks about, exactly as its spec gives it (Kubernetes'
    AuthorizationAttributesFrom: no system:authenticated is added)."""
    extra = spec.get("extra") or {}
    return UserInfo(name=str(spec.get("user") or ""), uid=str(spec.get("uid") or ""),
                    groups=tuple(str(g) for g in spec.get("groups") or ()),
                    extra={str(key): tuple(str(v) for v in values or ())
                           for key, values in extra.items()})


def _meta_set(metadata: Obj, *, ignore: tuple[str, ...]) -> bool:
    """Whether an ObjectMeta holds anything besides `ignore` and empty values."""
    return any(value not in (None, "", 0, [], {}) for key, value in metadata.items()
               if key not in ("managedFields", *ignore))


def _spec_problems(spec: Obj) -> list[FieldError]:
    """Kubernetes' ValidateSubjectAccessReviewSpec."""
    errors: list[FieldError] = []
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        errors.append(invalid("spec.nonResourceAttributes", non_resource,
                              "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        errors.append(_required_attributes())
    for key, value in (("resourceAttributes", resource),
                       ("nonResourceAttributes", non_resource)):
        if value is not None and not isinstance(value, dict):
            errors.append(invalid(f"spec.{key}", value, "must be an object"))
    if not spec.get("user") and not spec.get("groups"):
        errors.append(invalid("spec.user", spec.get("user") or "",
                              "at least one of user or group must be specified"))
    return errors


async def _subject_access_review(body: Obj, *, authorizer: Authorizer,
                                 namespace: str | None = None) -> Obj:
    """A SubjectAccessReview, or with `namespace` (the URL's) a LocalSubjectAccessReview,
    validated and answered as kube-apiserver's REST storage for them does."""
    local = namespace is not None
    kind = "LocalSubjectAccessReview" if local else "SubjectAccessReview"
    spec = body.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    metadata = body.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    errors = _spec_problems(spec)
    if local:
        # the apiserver's create handler: the body's namespace is the URL's, or unset
        if metadata.get("namespace") and metadata["namespace"] != namespace:
            raise ApiError.bad_request("the namespace of the provided object does not match "
                                       "the namespace sent on the request")
        metadata["namespace"] = namespace
        if _meta_set(metadata, ignore=("namespace",)):
            errors.append(invalid("metadata", metadata, "must be empty except for namespace"))
        attributes = spec.get("resourceAttributes")
        if isinstance(attributes, dict) and (attributes.get("namespace") or "") != namespace:
            errors.append(invalid("spec.resourceAttributes.namespace",
                                  attributes.get("namespace") or "",
                                  "must match metadata.namespace"))
        if spec.get("nonResourceAttributes") is not None:
            errors.append(invalid("spec.nonResourceAttributes",
                                  spec["nonResourceAttributes"],
                                  "disallowed on this kind of request"))
    elif _meta_set(metadata, ignore=()):
        errors.append(invalid("metadata", metadata, "must be empty"))
    if errors:
        raise ApiError.invalid(kind, "", errors, group="authorization.k8s.io")
    attributes = spec.get("resourceAttributes") or spec.get("nonResourceAttributes") or {}
    result = await authorizer.authorize(_attributes(_subject(spec), attributes))
    return {"kind": kind, "apiVersion": AUTHORIZATION_GV,
            "metadata": {"creationTimestamp": None,
                         **({"namespace": namespace} if local else {})},
            "spec": spec, "status": _access_status(result)}


# -- TokenReview -----------------------------------------------------------------------------


class BearerAuthenticator(Protocol):
    """The apiserver's bearer-token authenticator (`auth.authenticator.Authenticator`)."""

    async def from_authorization(self, header: str) -> UserInfo | None: ...


@dataclass(frozen=True)
class TokenVerdict:
    """What the authenticator made of a token: its user, the audiences it is valid for
    among those asked, or why it is not valid."""

    user: UserInfo | None
    audiences: tuple[str, ...] = ()
    error: str = ""


def registry_getter(registry: Registry) -> GetObject:
    """A live `GetObject` over the registry (None for an object that does not exist)."""
    return registry.get_or_none


class TokenReviewer:
    """Answers TokenReviews with the apiserver's own authenticator, as kube-apiserver's
    TokenReview storage does: the token is authenticated as if it had come in an
    `Authorization: Bearer` header, against `spec.audiences` or, when there are none, the
    API audiences (those the apiserver's own ServiceAccount tokens must carry: the
    `--service-account-issuer`, as kube-apiserver's `--api-audiences` defaults to).

    A ServiceAccount token is audience-aware: it is valid when its `aud` shares an
    audience with those asked (the shared ones are the status's `audiences`), else it is
    refused with the JWT authenticator's message. Static and certificate tokens are
    audience-agnostic: they are valid only for an API audience. Any other failure is
    reported as kube-apiserver's bearer-token authenticator reports it ("invalid bearer
    token"); Skiff's authenticator does not tell more."""

    def __init__(self, *, authenticator: BearerAuthenticator,
                 service_accounts: TokenAuthority, get: GetObject) -> None:
        self._authenticator = authenticator
        self._service_accounts = service_accounts
        self._get = get

    @property
    def api_audiences(self) -> tuple[str, ...]:
        return tuple(self._service_accounts.audiences)

    async def review(self, token: str, audiences: list[str]) -> TokenVerdict:
        wanted = audiences or list(self.api_audiences)
        claims = self._service_account_claims(token)
        if claims is None:  # audience-agnostic: static and certificate tokens
            shared = tuple(a for a in self.api_audiences if a in wanted)
            user = (await self._authenticator.from_authorization(f"Bearer {token}")
                    if shared else None)
            return (TokenVerdict(user, shared) if user is not None
                    else TokenVerdict(None, error=INVALID_BEARER_TOKEN))
        token_audiences = _audiences(claims.get("aud"))
        shared = tuple(a for a in token_audiences if a in wanted)
        if not shared:
            return TokenVerdict(None, error=f"token audiences {_go_quoted(token_audiences)} "
                                            f"is invalid for the target audiences "
                                            f"{_go_quoted(wanted)}")
        if set(shared) & set(self.api_audiences):
            user = await self._authenticator.from_authorization(f"Bearer {token}")
        else:  # valid for another audience only: the same checks, against that audience
            authority = copy.copy(self._service_accounts)
            authority.audiences = shared
            found = await authority.validate(token, self._get)
            user = found.with_authenticated() if found is not None else None
        return (TokenVerdict(user, shared) if user is not None
                else TokenVerdict(None, error=INVALID_BEARER_TOKEN))

    def _service_account_claims(self, token: str) -> Obj | None:
        """The unverified claims of a token that says it is one of this cluster's
        ServiceAccount tokens (its issuer, its `kubernetes.io` claim), else None."""
        if token.count(".") != 2:
            return None
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        if not isinstance(claims, dict) or claims.get("iss") != self._service_accounts.issuer \
                or "kubernetes.io" not in claims:
            return None
        return claims


def _audiences(aud: Any) -> tuple[str, ...]:
    if isinstance(aud, str):
        return (aud,)
    return tuple(str(a) for a in aud) if isinstance(aud, list) else ()


def _go_quoted(values: Any) -> str:
    """A string list as Go's %q prints it: `["a" "b"]`."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


async def _token_review(body: Obj, tokens: TokenReviewer | None) -> Obj:
    spec = body.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise ApiError.bad_request("token is required for TokenReview in authentication")
    audiences = spec.get("audiences") or []
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise ApiError.invalid("TokenReview", "", [invalid(
            "spec.audiences", audiences, "must be a list of strings")],
            group="authentication.k8s.io")
    metadata = body.get("metadata")
    review: Obj = {"kind": "TokenReview", "apiVersion": AUTHENTICATION_GV,
                   "metadata": metadata if isinstance(metadata, dict) and metadata
                   else {"creationTimestamp": None}, "spec": spec, "status": {}}
    if tokens is None:  # no token authenticator (insecure mode): returned unanswered
        return review
    verdict = await tokens.review(token, audiences)
    status: Obj = {"authenticated": verdict.user is not None,
                   "user": _user_info(verdict.user) if verdict.user is not None else {}}
    if verdict.audiences:
        status["audiences"] = list(verdict.audiences)
    if verdict.error:
        status["error"] = verdict.error
    review["status"] = status
    return review
