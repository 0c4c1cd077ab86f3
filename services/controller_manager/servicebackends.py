"""The part the Endpoints and EndpointSlice controllers share: work keyed by Service.

Both reconcile one Service at a time from the pods its selector matches, so both queue a
Service when it changes and when a pod it selects (before or after a change) does.
"""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.podutil import service_selects


class ServiceBackendsController(Controller):
    """A controller whose keys are Services, following the Services and their pods."""

    def __init__(self, *, context: ControllerContext, workers: int = 5) -> None:
        super().__init__(context=context, workers=workers)
        self.services = context.informers.resource("services")
        self.pods = context.informers.pods()
        self.services.add_handler(on_add=self._on_service,
                                  on_update=lambda _o, n: self._on_service(n),
                                  on_delete=self._on_service)
        self.pods.add_handler(on_add=self._on_pod, on_update=self._on_pod_update,
                              on_delete=self._on_pod)

    def _on_service(self, service: Obj) -> None:
        self.enqueue(object_key(service))

    def _on_pod(self, pod: Obj) -> None:
        for service in self.services.store.by_index(BY_NAMESPACE,
                                                    str(pod["metadata"].get("namespace"))):
            if service_selects((service.get("spec") or {}).get("selector") or {}, pod):
                self.enqueue(object_key(service))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(old)
        self._on_pod(new)

    def selected_pods(self, namespace: str, selector: dict[str, str]) -> list[Obj]:
        return [p for p in self.pods.store.by_index(BY_NAMESPACE, namespace)
                if service_selects(selector, p)]
