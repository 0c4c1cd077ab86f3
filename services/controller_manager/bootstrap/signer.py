"""The bootstrapsigner (pkg/controller/bootstrap/bootstrapsigner.go, SPEC JN3).

Keeps the `cluster-info` ConfigMap in kube-public signed: for every valid, unexpired
bootstrap token Secret in kube-system marked `usage-bootstrap-signing`, a key
`jws-kubeconfig-<token id>` holds the detached JWS of the ConfigMap's `kubeconfig`, keyed
by the token secret; keys of tokens that no longer sign are removed. A joining node that
knows a token proves with it that the kubeconfig (the API address and CA) comes from the
cluster. A ConfigMap without a `kubeconfig` key is left alone, as Kubernetes leaves it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from skiff.api.types import Obj
from skiff.bootstraptoken import (
    CLUSTER_INFO,
    CLUSTER_INFO_NAMESPACE,
    JWS_PREFIX,
    KUBECONFIG_KEY,
    NAMESPACE,
    SECRET_TYPE,
    USAGE_SIGNING,
    Token,
    expiration,
    sign_detached,
    signatures_of,
    usable_token,
    verify_detached,
)
from skiff.controller_manager.controller import Controller, ControllerContext

KEY = f"{CLUSTER_INFO_NAMESPACE}/{CLUSTER_INFO}"


def signed_data(data: Mapping[str, str], tokens: Iterable[Token]) -> dict[str, str] | None:
    """cluster-info's data with exactly one signature per signing token (a signature
    already there that still verifies is kept); None when nothing changes."""
    content = data.get(KUBECONFIG_KEY)
    if content is None:
        return None
    existing = signatures_of(data)
    wanted: dict[str, str] = {}
    for token in tokens:
        current = existing.get(token.id)
        wanted[token.id] = current if current is not None and verify_detached(
            current, content, token) else sign_detached(content, token)
    if wanted == existing:
        return None
    updated = {k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}
    updated.update({f"{JWS_PREFIX}{token_id}": sig for token_id, sig in wanted.items()})
    return updated


class BootstrapSigner(Controller):
    name = "bootstrapsigner"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=1)
        self.secrets = context.informers.in_namespace("secrets", NAMESPACE)
        self.config_maps = context.informers.in_namespace("configmaps", CLUSTER_INFO_NAMESPACE)
        self.secrets.add_handler(on_add=self._on_secret,
                                 on_update=lambda _o, n: self._on_secret(n),
                                 on_delete=self._on_secret)
        self.config_maps.add_handler(on_add=self._on_config_map,
                                     on_update=lambda _o, n: self._on_config_map(n))

    def _on_secret(self, secret: Obj) -> None:
        if secret.get("type") == SECRET_TYPE:
            self.enqueue(KEY)

    def _on_config_map(self, cm: Obj) -> None:
        if cm["metadata"].get("name") == CLUSTER_INFO:
            self.enqueue(KEY)

    async def reconcile(self, key: str) -> float | None:
        cm = self.config_maps.store.get(KEY)
        if cm is None:
            return None
        now = self.clock.now()
        secrets = self.secrets.store.list()
        tokens = [t for t in (usable_token(s, USAGE_SIGNING, now=now) for s in secrets) if t]
        updated = signed_data(cm.get("data") or {}, sorted(tokens, key=lambda t: t.id))
        if updated is not None:
            new = copy.deepcopy(cm)
            new["data"] = updated
            await self.client.update(new)
        # look again when the next signing token expires: its signature goes then
        expiries = [e for e in (expiration(s) for s in secrets
                                if usable_token(s, USAGE_SIGNING, now=now)) if e is not None]
        return min(expiries) - now + 0.5 if expiries else None
