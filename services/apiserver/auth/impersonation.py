"""User impersonation (`kubectl --as`, `--as-group`, `--as-uid`; the `Impersonate-*` headers),
as kube-apiserver's impersonation filter.

Why: RBAC is checked with `kubectl auth can-i ... --as=jane` and `--as=system:serviceaccount:
ns:name` throughout the Kubernetes documentation; an apiserver that ignores the headers
answers every such question as the caller (usually cluster-admin) and so says "yes" to all.

Each thing asked for is authorized for the caller with the verb `impersonate`: the user
(`users`, or `serviceaccounts` in its namespace for `system:serviceaccount:<ns>:<name>`),
each group (`groups`), the uid (`uids`, group authentication.k8s.io) and each extra value
(`userextras/<key>`). Then the request runs as the impersonated user: with the groups asked
for (a service account's own groups when none are), plus `system:authenticated`
(`system:unauthenticated` for `system:anonymous`) unless one of the two was asked for.
Groups, uid or extras without a user is an error, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from skiff.api import ApiError, Reason
from skiff.auth import (
    ANONYMOUS_USER,
    AUTHENTICATED_GROUP,
    UNAUTHENTICATED_GROUP,
    Attributes,
    Authorizer,
    UserInfo,
    forbidden,
)

__all__ = ["impersonate"]

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
SA_PREFIX = "system:serviceaccount:"

# header name (lower case) → its values, in order
Headers = Mapping[str, Sequence[str]]


async def impersonate(caller: UserInfo, headers: Headers, authorizer: Authorizer) -> UserInfo:
    """The user the request runs as; ApiError 403 if the caller may not impersonate it."""
    name = next(iter(headers.get(USER_HEADER) or ()), "")
    groups = [g for g in headers.get(GROUP_HEADER) or () if g]
    uid = next(iter(headers.get(UID_HEADER) or ()), "")
    extra: dict[str, tuple[str, ...]] = {}
    for header, values in headers.items():
        if header.startswith(EXTRA_PREFIX):
            extra[unquote(header.removeprefix(EXTRA_PREFIX)).lower()] = tuple(values)
    if not name:
        raise ApiError(Reason.INTERNAL_ERROR, "requested impersonation of groups, a uid or "
                       "user extras without impersonating a user (Impersonate-User / --as)")
    checks: list[Attributes] = []
    if name.startswith(SA_PREFIX) and name.count(":") == 3:
        namespace, sa = name.removeprefix(SA_PREFIX).split(":")
        checks.append(Attributes(user=caller, verb="impersonate", resource="serviceaccounts",
                                 namespace=namespace, name=sa))
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        checks.append(Attributes(user=caller, verb="impersonate", resource="users", name=name))
    checks += [Attributes(user=caller, verb="impersonate", resource="groups", name=group)
               for group in headers.get(GROUP_HEADER) or () if group]
    if uid:
        checks.append(Attributes(user=caller, verb="impersonate", resource="uids", name=uid,
                                 api_group=AUTHENTICATION_GROUP))
    checks += [Attributes(user=caller, verb="impersonate", resource="userextras",
                          subresource=key, name=value, api_group=AUTHENTICATION_GROUP)
               for key, values in extra.items() for value in values]
    for attrs in checks:
        result = await authorizer.authorize(attrs)
        if not result.allowed:
            raise forbidden(attrs, result.reason)
    always = UNAUTHENTICATED_GROUP if name == ANONYMOUS_USER else AUTHENTICATED_GROUP
    if AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
        groups.append(always)
    return UserInfo(name, uid, tuple(groups), extra)
