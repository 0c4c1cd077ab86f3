"""SPEC AX3: the `verify(token) -> UserInfo | None` seam the authn chain calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.apiserver.satoken import TokenAuthority
from skiff.auth import UserInfo

SA = {"metadata": {"name": "robot", "namespace": "team", "uid": "sa-uid"}}
POD = {"metadata": {"name": "web-0", "uid": "pod-uid"}}


def test_AX3_token_verifies_as_the_service_account(tmp_path: Path) -> None:
    authority = TokenAuthority(signing_key_file=str(tmp_path / "sa.key"))
    token, _ = authority.issue(namespace="team", service_account=SA, audiences=None,
                               expiration_seconds=3600, bound_pod=POD)
    user = authority.verify(token)
    assert isinstance(user, UserInfo)
    assert user.name == "system:serviceaccount:team:robot"
    assert user.uid == "sa-uid"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team",
                           "system:authenticated")
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("web-0",)
    # A second apiserver of the same data dir shares the key file and accepts it.
    assert TokenAuthority(signing_key_file=str(tmp_path / "sa.key")).verify(token) == user


@pytest.mark.parametrize("case", ["other-key", "expired", "wrong-audience", "garbage"])
def test_AX3_tokens_not_ours_verify_to_none(tmp_path: Path, case: str) -> None:
    authority = TokenAuthority(signing_key_file=str(tmp_path / "sa.key"))
    if case == "other-key":
        token, _ = TokenAuthority().issue(namespace="team", service_account=SA,
                                          audiences=None, expiration_seconds=3600)
    elif case == "expired":
        token, _ = authority.issue(namespace="team", service_account=SA, audiences=None,
                                   expiration_seconds=600, now=1_000_000.0)
    elif case == "wrong-audience":
        token, _ = authority.issue(namespace="team", service_account=SA,
                                   audiences=["vault"], expiration_seconds=3600)
    else:
        token = "not.a.jwt"
    assert authority.verify(token) is None
