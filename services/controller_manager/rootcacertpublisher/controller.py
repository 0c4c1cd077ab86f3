"""The root-ca-cert-publisher (pkg/controller/certificates/rootcacertpublisher).

Every namespace gets a ConfigMap `kube-root-ca.crt` whose `ca.crt` is the CA bundle that
verifies the apiserver: the `kube-api-access` volume of every pod names it, and in-cluster
clients and manifests mount it directly. A namespace's ConfigMap is (re)written when the
namespace appears and whenever the ConfigMap is changed or deleted. The bundle is
`--root-ca-file`, else the CA this controller-manager trusts the apiserver with; a cluster
without TLS has neither and gets no ConfigMaps, as Kubernetes' controller does not run
without a root CA.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)


NAME = "kube-root-ca.crt"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when "
               "using internal endpoints such as the internal service IP or "
               "kubernetes.default.svc. No other usage is guaranteed across distributions "
               "of Kubernetes clusters.")


def root_ca(context: ControllerContext) -> str:
    path = context.settings.root_ca_file or context.client.credentials.ca_file
    if not path:
        return ""
    try:
        return Path(path).read_text()
    except OSError as err:
        log.warning("root CA not readable; kube-root-ca.crt not published",
                    extra={"path": path, "error": str(err)})
        return ""


class RootCACertPublisher(Controller):
    name = "root-ca-cert-publisher"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=1)
        self.bundle = root_ca(context)
        self.namespaces = context.informers.resource("namespaces")
        self.config_maps = context.informers.resource("configmaps")
        if not self.bundle:
            return
        self.namespaces.add_handler(on_add=self._on_namespace,
                                    on_update=lambda _o, n: self._on_namespace(n))
        self.config_maps.add_handler(on_update=lambda _o, n: self._on_config_map(n),
                                     on_delete=self._on_config_map)

    def _on_namespace(self, ns: Obj) -> None:
        self.enqueue(str(ns["metadata"]["name"]))

    def _on_config_map(self, cm: Obj) -> None:
        if cm["metadata"].get("name") == NAME:
            self.enqueue(str(cm["metadata"].get("namespace")))

    def _wanted(self, namespace: str) -> Obj:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": namespace,
                             "annotations": {"kubernetes.io/description": DESCRIPTION}},
                "data": {"ca.crt": self.bundle}}

    async def reconcile(self, key: str) -> float | None:
        ns = self.namespaces.store.get(key)
        if not self.bundle or ns is None or ns["metadata"].get("deletionTimestamp") or \
                (ns.get("status") or {}).get("phase") == "Terminating":
            return None
        current = self.config_maps.store.get(f"{key}/{NAME}")
        if current is None:
            try:
                await self.client.create(self._wanted(key))
            except ApiError as err:
                if err.reason != Reason.ALREADY_EXISTS:
                    raise
                return 0.5  # our copy is behind: look again
            return None
        annotations = current["metadata"].get("annotations") or {}
        if current.get("data") == {"ca.crt": self.bundle} and \
                annotations.get("kubernetes.io/description") == DESCRIPTION:
            return None
        updated = copy.deepcopy(current)
        updated["data"] = {"ca.crt": self.bundle}
        updated.pop("binaryData", None)
        updated["metadata"]["annotations"] = {**annotations,
                                              "kubernetes.io/description": DESCRIPTION}
        await self.client.update(updated)
        return None


