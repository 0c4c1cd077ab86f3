"""The namespace controller (pkg/controller/namespace): deleting a namespace deletes
everything in it.

A DELETE marks the namespace Terminating (its `spec.finalizers` hold `kubernetes`). This
controller then deletes every object of every namespaced kind in it (pods gracefully, as
any DELETE), reports what is left in kube's conditions (NamespaceContentRemaining,
NamespaceFinalizersRemaining and the NamespaceDeletion* ones; see `conditions`), and once
nothing is left removes the `kubernetes` finalizer, which lets the apiserver remove the
namespace. The kinds are the built-in ones and the custom resources served now (SPEC EX2;
kube finds both through discovery), followed through the CRDs.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason
from skiff.api.kinds import KindInfo, all_kinds
from skiff.api.types import Obj
from skiff.client import object_key
from skiff.clock import rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.namespace.conditions import deletion_conditions
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
        # The custom kinds are known before the first reconcile (their informer syncs first).
        context.informers.custom_kinds()
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
        finalizers: dict[str, int] = {}
        others_remain = False  # objects other than the _LAST kinds' (sorted first) remain
        for info in sorted((k for k in all_kinds() if k.namespaced), key=_last):
            try:
                items = (await self.client.list(info.ref, name))["items"]
            except ApiError as err:
                if info.custom and err.reason == Reason.NOT_FOUND:
                    continue  # its CRD went meanwhile (and its objects with it)
                raise
            if _last(info) and others_remain:
                left = items  # other objects still use them
            else:
                left = [obj for obj in [await self._delete(info, name, o) for o in items]
                        if obj is not None]
            if not left:
                continue
            remaining[_reported(info)] = len(left)
            others_remain = others_remain or not _last(info)
            for obj in left:
                for finalizer in obj["metadata"].get("finalizers") or []:
                    finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        await self._report(ns, remaining, finalizers)
        if remaining:
            return 1.0
        await self._finalize(ns)
        return None

    async def _delete(self, info: KindInfo, namespace: str, obj: Obj) -> Obj | None:
        """Delete one object (unless it is being deleted already); what is left of it."""
        if obj["metadata"].get("deletionTimestamp"):
            return obj
        try:
            result = await self.client.delete(info.ref, obj["metadata"]["name"], namespace,
                                              propagation_policy="Background")
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            if err.reason == Reason.CONFLICT:
                return obj
            raise
        return None if result.get("deleted") else dict(result.get("object") or obj)

    async def _report(self, ns: Obj, remaining: dict[str, int],
                      finalizers: dict[str, int]) -> None:
        conditions = deletion_conditions(
            list((ns.get("status") or {}).get("conditions") or []), remaining=remaining,
            finalizers=finalizers, now=rfc3339(self.clock.now()))
        if conditions is None:
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


def _last(info: KindInfo) -> bool:
    return not info.custom and info.resource in _LAST


def _reported(info: KindInfo) -> str:
    """How kube names a resource in the NamespaceContentRemaining message: `<plural>.<group>`
    (`pods.` for the core group, `crontabs.stable.example.com`)."""
    return f"{info.resource}.{info.group}"
