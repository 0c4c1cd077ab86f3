"""kube-controller-manager's `serviceaccount` controller: it makes sure every active
namespace has the ServiceAccounts of `--service-account-names` (Kubernetes: `default`),
re-creating one that is deleted. Keys are namespace names; a namespace that is being
terminated is left alone (the apiserver refuses new content there anyway).
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)


DEFAULT_SERVICE_ACCOUNTS = ("default",)


class ServiceAccountsController(Controller):
    name = "serviceaccount"

    def __init__(self, *, context: ControllerContext,
                 names: tuple[str, ...] = DEFAULT_SERVICE_ACCOUNTS) -> None:
        super().__init__(context=context, workers=2)
        self.names = names
        self.namespaces = context.informers.namespaces()
        self.accounts = context.informers.service_accounts()
        self.namespaces.add_handler(on_add=self._on_namespace,
                                    on_update=lambda _o, n: self._on_namespace(n))
        self.accounts.add_handler(on_delete=self._on_account_deleted)

    def _on_namespace(self, ns: Obj) -> None:
        self.enqueue(ns["metadata"]["name"])

    def _on_account_deleted(self, sa: Obj) -> None:
        if sa["metadata"]["name"] in self.names:
            self.enqueue(sa["metadata"].get("namespace", ""))

    async def reconcile(self, key: str) -> float | None:
        ns = self.namespaces.store.get(key)
        if ns is None or is_terminating(ns) or (ns.get("status") or {}).get(
                "phase") == "Terminating":
            return None
        for name in self.names:
            if self.accounts.store.get(f"{key}/{name}") is not None:
                continue
            try:
                await self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                          "metadata": {"name": name, "namespace": key}},
                                         namespace=key)
            except ApiError as err:
                if err.reason in (Reason.ALREADY_EXISTS, Reason.NOT_FOUND):
                    continue
                if err.reason == Reason.FORBIDDEN:  # the namespace is being terminated
                    return None
                raise
            log.info("created service account", extra={"namespace": key, "serviceAccount": name})
        return None
