"""The bootstrap token authenticator (kube-apiserver's `--enable-bootstrap-token-auth`,
SPEC JN3).

A bearer token `<id>.<secret>` is user `system:bootstrap:<id>` in `system:bootstrappers`
(and the Secret's `auth-extra-groups`) when the kube-system Secret `bootstrap-token-<id>`
is a valid bootstrap token, not being deleted, unexpired, marked
`usage-bootstrap-authentication` and holds that secret (compared in constant time), as
plugin/pkg/auth/authenticator/token/bootstrap does. Anything else is not this
authenticator's token: the request is 401. The Secrets are read from a copy of kube-system's
bootstrap token Secrets fed by the watch cache (Kubernetes reads a secret lister), with a
live read while the copy is not yet listed or has not seen the Secret.
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from skiff.api import ApiError, lookup
from skiff.api.kinds import storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.watchcache import WatchCache, WatchRequest
from skiff.auth import UserInfo
from skiff.bootstraptoken import (
    NAMESPACE,
    SECRET_PREFIX,
    SECRET_TYPE,
    TOKEN_RE,
    USAGE_AUTHENTICATION,
    USER_PREFIX,
    TokenError,
    groups_of,
    usable_token,
)

log = logging.getLogger(__name__)


def looks_like_bootstrap_token(token: str) -> bool:
    return TOKEN_RE.match(token) is not None


class BootstrapTokens:
    """kube-system's bootstrap token Secrets (name -> Secret), kept current from the
    watch cache by `run()`; `authenticate` answers for one bearer token."""

    def __init__(self, storage: Storage, cache: WatchCache) -> None:
        self._info = lookup("secrets")
        self._storage = storage
        self._cache = cache
        self._prefix = f"{storage_prefix(self._info)}{NAMESPACE}/"
        self._secrets: dict[str, Obj] = {}
        self._synced = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                kvs, revision = await self._storage.list(self._prefix)
                self._secrets = {str(kv.obj["metadata"]["name"]): kv.obj for kv in kvs
                                 if kv.obj and kv.obj.get("type") == SECRET_TYPE}
                self._synced.set()
                request = WatchRequest(self._info, NAMESPACE, lambda _: True,
                                       selects_all=True)
                async for ev in self._cache.watch(request, revision):
                    if ev.type == "BOOKMARK":
                        continue
                    name = str(ev.object["metadata"]["name"])
                    if ev.type == "DELETED" or ev.object.get("type") != SECRET_TYPE:
                        self._secrets.pop(name, None)
                    else:
                        self._secrets[name] = ev.object
            except ApiError as err:
                log.warning("bootstrap token copy resync", extra={"error": err.message})
                await asyncio.sleep(0.5)

    @property
    def synced(self) -> bool:
        """Whether the copy has been listed (a miss is then still read live)."""
        return self._synced.is_set()

    async def _secret(self, name: str) -> Obj | None:
        if self._synced.is_set() and name in self._secrets:
            return self._secrets[name]
        kv, _ = await self._storage.get(f"{self._prefix}{name}")
        return kv.obj if kv is not None else None

    async def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, or None (401) when no usable Secret holds it."""
        match = TOKEN_RE.match(token)
        if match is None:
            return None
        token_id, token_secret = match.group(1), match.group(2)
        secret = await self._secret(f"{SECRET_PREFIX}{token_id}")
        if secret is None:
            log.debug("no bootstrap token secret", extra={"token_id": token_id})
            return None
        found = usable_token(secret, USAGE_AUTHENTICATION)
        if found is None or found.id != token_id:
            return None
        if not hmac.compare_digest(found.secret.encode(), token_secret.encode()):
            return None
        try:
            groups = groups_of(secret)
        except TokenError as err:
            log.info("bootstrap token has invalid groups", extra={"token_id": token_id,
                                                                  "error": str(err)})
            return None
        return UserInfo(f"{USER_PREFIX}{token_id}", groups=tuple(groups)).with_authenticated()
