"""SPEC AX3: the `verify(token) -> UserInfo | None` seam the authn chain calls."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from skiff.apiserver.auth.satoken import TokenAuthority
from skiff.auth import UserInfo
from skiff.clock import rfc3339

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


# -- SPEC AU9: a token dies with what it is bound to (Kubernetes' validator.Validate) -------

NOW = time.time()


def _objects(*objs: dict[str, Any]) -> Callable[[str, str | None, str],
                                               Awaitable[dict[str, Any] | None]]:
    by_key = {(str(o["kind"]), str(o["metadata"]["name"])): o for o in objs}
    kinds = {"serviceaccounts": "ServiceAccount", "pods": "Pod", "secrets": "Secret",
             "nodes": "Node"}

    async def get(resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return by_key.get((kinds[resource], name))
    return get


def _obj(kind: str, name: str, uid: str, deleted: str = "") -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "team", "uid": uid}
    if deleted:
        meta["deletionTimestamp"] = deleted
    return {"kind": kind, "metadata": meta}


LIVE_SA = _obj("ServiceAccount", "robot", "sa-uid")
LIVE_POD = _obj("Pod", "web-0", "pod-uid")


@pytest.mark.parametrize(("objects", "alive"), [
    ((LIVE_SA, LIVE_POD), True),
    ((LIVE_POD,), False),  # the ServiceAccount is gone
    ((_obj("ServiceAccount", "robot", "new-uid"), LIVE_POD), False),  # recreated
    ((LIVE_SA,), False),  # the pod is gone
    ((LIVE_SA, _obj("Pod", "web-0", "other-uid")), False),  # another pod, same name
    # terminating: valid until a minute after its deletionTimestamp (grace + leeway)
    ((LIVE_SA, _obj("Pod", "web-0", "pod-uid", deleted=rfc3339(NOW - 30))), True),
    ((LIVE_SA, _obj("Pod", "web-0", "pod-uid", deleted=rfc3339(NOW - 90))), False),
    ((_obj("ServiceAccount", "robot", "sa-uid", deleted=rfc3339(NOW - 600)),
      LIVE_POD), False),
], ids=["alive", "sa-deleted", "sa-recreated", "pod-deleted", "pod-recreated",
        "pod-terminating", "pod-deleted-over-a-minute-ago", "sa-terminating-long-ago"])
async def test_au9_a_pod_bound_token_lives_as_long_as_its_pod_and_service_account(
        objects: tuple[dict[str, object], ...], alive: bool) -> None:
    authority = TokenAuthority()
    token, _ = authority.issue(namespace="team", service_account=SA, audiences=None,
                               expiration_seconds=3600, bound_pod=POD,
                               pod_node={"metadata": {"name": "node-1", "uid": "n"}},
                               now=NOW - 10)
    user = await authority.validate(token, _objects(*objects), now=NOW)
    assert (user is not None) is alive
    if user is not None:
        assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)
        assert user.extra["authentication.kubernetes.io/node-name"] == ("node-1",)


@pytest.mark.parametrize("bound", ["secret", "node"])
async def test_au9_secret_and_node_bound_tokens_die_with_their_object(bound: str) -> None:
    authority = TokenAuthority()
    target = _obj("Secret" if bound == "secret" else "Node", "thing", "thing-uid")
    token, _ = authority.issue(
        namespace="team", service_account=SA, audiences=None, expiration_seconds=3600,
        bound_secret=target if bound == "secret" else None,
        bound_node=target if bound == "node" else None, now=NOW - 10)
    assert await authority.validate(token, _objects(LIVE_SA, target), now=NOW) is not None
    assert await authority.validate(token, _objects(LIVE_SA), now=NOW) is None
    moved = _obj(str(target["kind"]), "thing", "another-uid")
    assert await authority.validate(token, _objects(LIVE_SA, moved), now=NOW) is None
