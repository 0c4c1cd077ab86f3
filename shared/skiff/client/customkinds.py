"""Following CustomResourceDefinitions outside the apiserver (SPEC EX2).

A process that addresses objects by kind (the controller-manager's garbage collector and
namespace controller, anything that resolves an ownerReference) must know the custom kinds
the apiserver serves now, as kube's controllers learn them from discovery. `CustomKinds`
watches `customresourcedefinitions` through an informer and keeps this process's kind table
(`skiff.api.kinds`) in step: a CRD whose `Established` condition is True registers the
KindInfos `kind_infos(crd)` gives (the apiserver registers the same), and one that is
deleted, or no longer established, is unregistered. Subscribers hear each kind come and go,
so a controller can start and stop watching it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import KindInfo, register_custom, unregister_custom
from skiff.api.types import Obj, ObjView
from skiff.client.informer import Informer

log = logging.getLogger(__name__)

RESOURCE = "customresourcedefinitions"

KindHandler = Callable[[KindInfo], None]
# (the kind, whether its CRD was deleted: the apiserver deletes a CRD's objects before the
# CRD goes, so every object of the kind is gone then; otherwise they are only not served)
RemovedHandler = Callable[[KindInfo, bool], None]


def established(crd: ObjView) -> bool:
    """Whether the CRD's `Established` condition is True (the apiserver serves it)."""
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Established":
            return condition.get("status") == "True"
    return False


@dataclass
class _Subscriber:
    on_added: KindHandler
    on_removed: RemovedHandler


class CustomKinds:
    """The custom kinds served now, from an informer on `customresourcedefinitions`
    (build it before the informer runs; handlers run on the informer's task)."""

    def __init__(self, informer: Informer) -> None:
        if informer.resource != RESOURCE:
            raise ValueError(f"CustomKinds follows {RESOURCE}, not {informer.resource}")
        self.informer = informer
        self._kinds: dict[str, KindInfo] = {}  # CRD name -> its stored version's KindInfo
        self._subscribers: list[_Subscriber] = []
        informer.add_handler(on_add=self._apply, on_update=lambda _old, new: self._apply(new),
                             on_delete=self._deleted)

    def subscribe(self, *, on_added: KindHandler, on_removed: RemovedHandler) -> None:
        """Hear of every custom kind served from now on (those served already at once);
        `on_added` again when a served kind changes (its versions or subresources)."""
        subscriber = _Subscriber(on_added, on_removed)
        self._subscribers.append(subscriber)
        for info in list(self._kinds.values()):
            _call(subscriber.on_added, info)

    def served(self) -> list[KindInfo]:
        """The stored version's KindInfo of every custom kind served now."""
        return list(self._kinds.values())

    def _apply(self, crd: Obj) -> None:
        name = str(crd["metadata"]["name"])
        if not established(crd):
            self._drop(name, deleted=False)
            return
        stored, served = kind_infos(crd)
        if not stored.kind or not stored.resource:
            self._drop(name, deleted=False)
            return
        previous = self._kinds.get(name)
        if previous is not None and previous.ref != stored.ref:
            self._drop(name, deleted=False)
        register_custom(stored, served)
        self._kinds[name] = stored
        if previous != stored:
            log.info("custom kind served", extra={"crd": name, "resource": stored.ref,
                                                  "apiVersion": stored.api_version})
            for subscriber in list(self._subscribers):
                _call(subscriber.on_added, stored)

    def _deleted(self, crd: Obj) -> None:
        self._drop(str(crd["metadata"]["name"]), deleted=True)

    def _drop(self, name: str, *, deleted: bool) -> None:
        info = self._kinds.pop(name, None)
        if info is None:
            return
        unregister_custom(info.ref)
        log.info("custom kind no longer served", extra={"crd": name, "resource": info.ref})
        for subscriber in list(self._subscribers):
            _call(subscriber.on_removed, info, deleted)


def _call(handler: Callable[..., None], *args: object) -> None:
    info = args[0]
    assert isinstance(info, KindInfo)
    try:
        handler(*args)
    except Exception:
        log.exception("custom kind handler failed", extra={"resource": info.ref})
