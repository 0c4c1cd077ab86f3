"""The APIServices' `Available` condition (kube-aggregator's local and remote availability
controllers), checked every `interval` seconds by every apiserver:

- a local APIService (no Service) is `True`, reason `Local`;
- a remote one is `False` when its Service is missing (`ServiceNotFound`), does not listen
  on the APIService's port (`ServicePortError`), has no EndpointSlice
  (`EndpointsNotFound`) or no ready endpoint with that port's name (`MissingEndpoints`)
  — a Service of another type than ClusterIP skips those two — or when
  `GET /apis/<group>/<version>` through the proxy's own path fails
  (`FailedDiscoveryCheck`); else `True`, `Passed`, "all checks passed".

A new or changed APIService is checked at once. The condition is written through the
status subresource only when it changed (`lastTransitionTime` kept while its status
stays), so several apiservers agree without churn. The proxy reads the condition back from
its table: a request for a group/version that is not available answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from skiff.api import ApiError, Reason
from skiff.api.types import Obj, ObjView
from skiff.apiserver.aggregator.local import (
    LOCAL_MESSAGE,
    LOCAL_REASON,
    ensure_builtin,
    sync_crd_api_services,
)
from skiff.apiserver.aggregator.table import RESOURCE, Registration, registration_of
from skiff.apiserver.registry.store import Registry
from skiff.clock import rfc3339

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class DiscoveryChecker(Protocol):
    """The backend's discovery check (the proxy's `Proxier`)."""

    async def discovery_check(self, reg: Registration) -> str | None: ...


@dataclass(frozen=True)
class Verdict:
    """What the Available condition should say."""

    status: str
    reason: str
    message: str


PASSED = Verdict("True", "Passed", "all checks passed")
LOCAL = Verdict("True", LOCAL_REASON, LOCAL_MESSAGE)


def endpoint_verdict(reg: Registration, service: ObjView | None,
                     slices: Sequence[ObjView]) -> Verdict | None:
    """The Service and EndpointSlice checks, with kube's reasons and messages; None when
    they pass (the discovery check decides)."""
    assert reg.service is not None
    name, namespace = reg.service.name, reg.service.namespace
    if service is None:
        return Verdict("False", "ServiceNotFound",
                       f'service/{name} in "{namespace}" is not present')
    spec = service.get("spec") or {}
    if (spec.get("type") or "ClusterIP") != "ClusterIP":
        return None
    port = next((p for p in spec.get("ports") or []
                 if isinstance(p, dict) and p.get("port") == reg.service.port), None)
    if port is None:
        return Verdict("False", "ServicePortError",
                       f'service/{name} in "{namespace}" is not listening on port '
                       f"{reg.service.port}")
    if not slices:
        return Verdict("False", "EndpointsNotFound",
                       f'cannot find endpointslices for service/{name} in "{namespace}"')
    port_name = str(port.get("name") or "")
    for es in slices:
        ready = any((e.get("conditions") or {}).get("ready") is not False
                    for e in es.get("endpoints") or [] if isinstance(e, dict))
        named = any(isinstance(p, dict) and (p.get("name") or "") == port_name
                    and p.get("port") is not None for p in es.get("ports") or [])
        if ready and named:
            return None
    return Verdict("False", "MissingEndpoints",
                   f'endpointslices for service/{name} in "{namespace}" have no addresses '
                   f'with port name "{port_name}"')


def with_condition(obj: ObjView, verdict: Verdict, now: str) -> Obj | None:
    """`obj`'s status with the Available condition set to `verdict`, or None when it
    already says so (the transition time moves only when the status does)."""
    status = dict(obj.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == "Available"), None)
    since = (old.get("lastTransitionTime") if old is not None
             and old.get("status") == verdict.status else None) or now
    new = {"type": "Available", "status": verdict.status, "lastTransitionTime": since,
           "reason": verdict.reason, "message": verdict.message}
    if old == new:
        return None
    rest = [c for c in conditions if c.get("type") != "Available"]
    return {**status, "conditions": [*rest, new]}


class AvailabilityController:
    """Keeps every APIService's Available condition current (see the module doc)."""

    def __init__(self, registry: Registry, proxier: DiscoveryChecker, *,
                 interval: float = 10.0) -> None:
        self.registry = registry
        self.proxier = proxier
        self.interval = interval
        self._bootstrapped = False
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Check now, not at the next interval (an APIService was added or changed)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.sync_once()
            except ApiError as err:
                log.warning("APIService availability will be checked again",
                            extra={"error": err.message})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    async def sync_once(self) -> None:
        """One pass: the local APIServices made, then every APIService's condition."""
        if not self._bootstrapped:
            await ensure_builtin(self.registry)
            self._bootstrapped = True
        listed = await self.registry.list(RESOURCE, None)
        await sync_crd_api_services(self.registry, listed["items"])
        results = await asyncio.gather(*(self.check(obj) for obj in listed["items"]),
                                       return_exceptions=True)
        for obj, result in zip(listed["items"], results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                log.warning("could not check an APIService", extra={
                    "apiservice": obj["metadata"]["name"], "error": str(result)})

    async def verdict(self, reg: Registration) -> Verdict:
        if reg.service is None:
            return LOCAL
        service = await self.registry.get_or_none("services", reg.service.namespace,
                                                  reg.service.name)
        slices = (await self.registry.list(
            "endpointslices", reg.service.namespace,
            label_selector=f"{SERVICE_NAME_LABEL}={reg.service.name}"))["items"]
        found = endpoint_verdict(reg, service, slices)
        if found is not None:
            return found
        failure = await self.proxier.discovery_check(reg)
        if failure is not None:
            return Verdict("False", "FailedDiscoveryCheck", failure)
        return PASSED

    async def check(self, obj: Obj) -> None:
        reg = registration_of(obj)
        verdict = await self.verdict(reg)
        status = with_condition(obj, verdict, rfc3339(self.registry.clock.now()))
        if status is None:
            return
        if verdict.status != ("True" if reg.available else "False"):
            log.info("APIService availability changed", extra={
                "apiservice": reg.name, "status": verdict.status, "reason": verdict.reason})
        body = {**obj, "status": status,
                "metadata": {k: v for k, v in obj["metadata"].items()
                             if k != "resourceVersion"}}
        try:
            await self.registry.update(RESOURCE, None, body, subresource="status")
        except ApiError as err:
            if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                raise
