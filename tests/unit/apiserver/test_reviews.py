"""The pure parts of the reviews (SPEC AX5) — the RBAC reason a
SubjectAccessReview reports, and how a TokenReview treats `spec.audiences` (kube-apiserver:
ServiceAccount tokens are audience-aware, static tokens valid for the API's audiences only).
The real apiserver is driven in tests/integration/auth/test_access_reviews.py."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.apiserver.auth.reviews import TokenReviewer
from skiff.apiserver.auth.satoken import TokenAuthority
from skiff.auth import Attributes, RbacRules, UserInfo

ISSUER = "https://kubernetes.default.svc.cluster.local"
SA: Obj = {"metadata": {"name": "robot", "namespace": "team", "uid": "sa-uid"}}


def test_rbac_reason_names_a_service_account_subject_with_its_namespace() -> None:
    rules = RbacRules.from_objects(
        roles=[{"metadata": {"name": "reader", "namespace": "team"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}],
        cluster_roles=[], cluster_role_bindings=[],
        role_bindings=[{"metadata": {"name": "read", "namespace": "team"},
                        "roleRef": {"kind": "Role", "name": "reader"},
                        "subjects": [{"kind": "User", "name": "someone-else"},
                                     {"kind": "ServiceAccount", "name": "robot"}]}])
    result = rules.authorize(Attributes(user=UserInfo("system:serviceaccount:team:robot"),
                                        verb="get", resource="pods", namespace="team"))
    assert result.allowed
    assert result.reason == ('RBAC: allowed by RoleBinding "read/team" of Role "reader" to '
                             'ServiceAccount "robot/team"')


class _Authenticator:
    """The apiserver's bearer authenticator, reduced to a static token and this
    cluster's ServiceAccount tokens (checked against the API's audiences)."""

    def __init__(self, authority: TokenAuthority) -> None:
        self.authority = authority

    async def from_authorization(self, header: str) -> UserInfo | None:
        token = header.removeprefix("Bearer ")
        if token == "static":
            return UserInfo("bob", "1001", ("system:authenticated",))
        return self.authority.verify(token)


async def _service_account(resource: str, namespace: str | None, name: str) -> Obj | None:
    return SA if (resource, name) == ("serviceaccounts", "robot") else None


@pytest.mark.parametrize(("token_audiences", "asked", "user", "audiences", "error"), [
    pytest.param(None, [], "static", (ISSUER,), "", id="static-token-api-audience"),
    pytest.param(None, ["vault"], "", (), "invalid bearer token",
                 id="static-token-other-audience"),
    pytest.param([ISSUER], [], "sa", (ISSUER,), "", id="sa-token-api-audience"),
    pytest.param(["vault", "other"], ["other", "vault"], "sa", ("vault", "other"), "",
                 id="sa-token-asked-audiences-in-token-order"),
    pytest.param(["vault"], [], "", (),
                 f'token audiences ["vault"] is invalid for the target audiences '
                 f'["{ISSUER}"]', id="sa-token-not-for-the-apiserver"),
    pytest.param(["vault"], ["vault"], "forged", (), "invalid bearer token",
                 id="sa-token-signed-by-another-key"),
])
async def test_token_review_audiences_as_kube_apiserver(
        token_audiences: list[str] | None, asked: list[str], user: str,
        audiences: tuple[str, ...], error: str) -> None:
    authority = TokenAuthority()
    reviewer = TokenReviewer(authenticator=_Authenticator(authority),
                             service_accounts=authority, get=_service_account)
    if token_audiences is None:
        token = "static"
    else:
        signer = TokenAuthority() if user == "forged" else authority
        token, _ = signer.issue(namespace="team", service_account=SA,
                                audiences=token_audiences, expiration_seconds=3600)
    verdict = await reviewer.review(token, asked)
    expected = {"static": "bob", "sa": "system:serviceaccount:team:robot"}.get(user)
    assert (verdict.user.name if verdict.user else None) == expected
    assert verdict.audiences == audiences
    assert verdict.error == error
    if verdict.user is not None:
        assert "system:authenticated" in verdict.user.groups
