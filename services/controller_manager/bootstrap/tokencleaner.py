"""The tokencleaner (pkg/controller/bootstrap/tokencleaner.go, SPEC JN3).

Deletes kube-system's bootstrap token Secrets once their `expiration` has passed (one whose
expiration is not RFC 3339 counts as expired, as Kubernetes counts it), with the Secret's
uid as a precondition so a token re-created under the same name survives. A Secret that
has not expired yet is looked at again when it does.
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.bootstraptoken import NAMESPACE, SECRET_TYPE, expiration
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)


class TokenCleaner(Controller):
    name = "tokencleaner"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=1)
        self.secrets = context.informers.in_namespace("secrets", NAMESPACE)
        self.secrets.add_handler(on_add=self._on_secret,
                                 on_update=lambda _o, n: self._on_secret(n))

    def _on_secret(self, secret: Obj) -> None:
        if secret.get("type") == SECRET_TYPE:
            meta = secret["metadata"]
            self.enqueue(f"{meta.get('namespace')}/{meta['name']}")

    async def reconcile(self, key: str) -> float | None:
        secret = self.secrets.store.get(key)
        if secret is None or secret.get("type") != SECRET_TYPE \
                or secret["metadata"].get("deletionTimestamp"):
            return None
        expires = expiration(secret)
        if expires is None:
            return None
        left = expires - self.clock.now()
        if left >= 0:
            return left + 0.5  # after it expires, not at the very second
        meta = secret["metadata"]
        log.info("deleting expired bootstrap token", extra={"secret": key})
        try:
            await self.client.delete("secrets", str(meta["name"]), str(meta["namespace"]),
                                     uid=str(meta.get("uid") or "") or None)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
        return None
