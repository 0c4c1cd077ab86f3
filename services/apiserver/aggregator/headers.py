"""The requesting user as kube-apiserver's front proxy hands it to an extension apiserver
(client-go `transport.SetAuthProxyHeaders`): `X-Remote-User`, one `X-Remote-Group` per
group, `X-Remote-Extra-<key>` per extra value (the key escaped as a header name must be),
over a connection the apiserver opened with its proxy client certificate. What the client
sent that the backend must not trust or see is dropped: its credentials (`Authorization`,
already used to authenticate it here), `Impersonate-*` (already applied), any
`X-Remote-*` of its own, and the hop-by-hop headers of this one connection.
"""

from __future__ import annotations

from collections.abc import Mapping

from skiff.auth import UserInfo

REMOTE_USER = "X-Remote-User"
REMOTE_GROUP = "X-Remote-Group"
REMOTE_EXTRA_PREFIX = "X-Remote-Extra-"
# the user the availability check speaks as (kube's `system:kube-aggregator`, a master)
AGGREGATOR_USER = UserInfo(name="system:kube-aggregator", groups=("system:masters",))

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "content-length",
                         "accept-encoding", "proxy-authorization", "proxy-authenticate"})
_NOT_FORWARDED_PREFIXES = ("impersonate-", "x-remote-")
_TOKEN_BYTES = frozenset(b"!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                         b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")  # RFC 7230 token chars, less '%'


def escape_extra_key(key: str) -> str:
    """An extra key as a header-name suffix: bytes outside the token characters (and '%')
    percent-encoded, as client-go's `headerKeyEscape`."""
    return "".join(chr(b) if b in _TOKEN_BYTES else f"%{b:02X}" for b in key.encode())


def user_headers(user: UserInfo) -> list[tuple[str, str]]:
    """The front-proxy headers naming `user`, in client-go's order."""
    headers = [(REMOTE_USER, user.name)]
    headers += [(REMOTE_GROUP, group) for group in user.groups]
    for key, values in user.extra.items():
        headers += [(REMOTE_EXTRA_PREFIX + escape_extra_key(key), value) for value in values]
    return headers


def forwarded_headers(incoming: Mapping[str, str], user: UserInfo) -> list[tuple[str, str]]:
    """The headers of a proxied request: the client's, less what is never passed on, then
    the user's."""
    kept = [(name, value) for name, value in incoming.items()
            if name.lower() not in _HOP_BY_HOP and name.lower() != "authorization"
            and not name.lower().startswith(_NOT_FORWARDED_PREFIXES)]
    return kept + user_headers(user)
