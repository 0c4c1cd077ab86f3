"""The namespace controller (pkg/controller/namespace): deleting a namespace deletes
everything in it.

A DELETE marks the namespace Terminating (its `spec.finalizers` hold `kubernetes`). This
controller then deletes every object of every namespaced kind in it (pods gracefully, as
any DELETE), reports what is left in the NamespaceContentRemaining / NamespaceDeletion*
conditions, and once nothing is left removes the `kubernetes` finalizer, which lets the
apiserver remove the namespace.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import KINDS, ApiError, Reason
from skiff.api.types import Obj
from skiff.client import object_key
from skiff.clock import rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.writes import try_update

log = logging.getLogger(__name__)

FINALIZER = "kubernetes"
# Kinds whose objects live only for others (deleted last, after pods are gone).
_LAST = ("events", "leases")


class NamespaceController(Controller):
    name = "namespace"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2)
        self.namespaces = context.informers.resource("namespaces")
        self.namespaces.add_handler(on_add=self._on_ns, on_update=lambda _o, n: self._on_ns(n))

    def _on_ns(self, ns: Obj) -> None:
        if ns["metadata"].get("deletionTimestamp"):
            self.enqueue(object_key(ns))

    async def reconcile(self, key: str) -> float | None:
        ns = self.namespaces.store.get(key)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        if FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or []):
            return None
        name = ns["metadata"]["name"]
        remaining: dict[str, int] = {}
        resources = sorted((k.resource for k in KINDS if k.namespaced),
                           key=lambda r: r in _LAST)
        for resource in resources:
            items = (await self.client.list(resource, name))["items"]
            if not items:
                continue
            remaining[resource] = len(items)
            if resource in _LAST and any(remaining.get(r) for r in resources
                                         if r not in _LAST):
                continue
            for obj in items:
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    await self.client.delete(resource, obj["metadata"]["name"], name,
                                             propagation_policy="Background")
                except ApiError as err:
                    if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                        raise
        if remaining:
            await self._report(ns, remaining)
            return 1.0
        await self._finalize(ns)
        return None

    async def _report(self, ns: Obj, remaining: dict[str, int]) -> None:
        message = "Some resources are remaining: " + ", ".join(
            f"{r} has {n} resource instances" for r, n in sorted(remaining.items()))
        conditions = [c for c in (ns.get("status") or {}).get("conditions") or []
                      if c.get("type") != "NamespaceContentRemaining"]
        conditions.append({"type": "NamespaceContentRemaining", "status": "True",
                           "reason": "SomeResourcesRemain", "message": message,
                           "lastTransitionTime": rfc3339(self.clock.now())})
        old = [c for c in (ns.get("status") or {}).get("conditions") or []
               if c.get("type") == "NamespaceContentRemaining"]
        if old and old[0].get("message") == message:
            return
        updated = copy.deepcopy(ns)
        updated.setdefault("status", {})["conditions"] = conditions
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise

    async def _finalize(self, ns: Obj) -> None:
        name = ns["metadata"]["name"]
        for _ in range(5):
            try:
                live = await self.client.get("namespaces", name)
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    return
                raise
            live.setdefault("spec", {})["finalizers"] = [
                f for f in live["spec"].get("finalizers") or [] if f != FINALIZER]
            done, written = await try_update(self.client, live)
            if written is not None:
                log.info("namespace emptied; finalized", extra={"namespace": name})
            if done:
                return
