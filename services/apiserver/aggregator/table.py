"""The APIServices one apiserver serves, as the proxy and discovery read them on every
request: each stored APIService parsed once into a `Registration`, by group/version,
followed through this apiserver's watch cache (as kube-aggregator's proxy handlers follow
their informer), so a `kubectl apply` of an APIService routes within a moment on every
apiserver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from skiff.api import ApiError, Reason
from skiff.api.groups.apiregistration import DEFAULT_SERVICE_PORT, ca_bundle_bytes
from skiff.api.types import ObjView
from skiff.apiserver.admission.webhook.hooks import ServiceRef
from skiff.apiserver.registry.store import Registry

log = logging.getLogger(__name__)

RESOURCE = "apiservices"


@dataclass(frozen=True)
class Registration:
    """One APIService: the group/version it registers and where requests for it go (no
    `service`: served by this apiserver itself, `Local`)."""

    name: str
    group: str
    version: str
    group_priority: int = 0
    version_priority: int = 0
    service: ServiceRef | None = None
    ca_bundle: bytes = b""
    insecure_skip_tls_verify: bool = False
    available: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def local(self) -> bool:
        return self.service is None

    @property
    def server_name(self) -> str:
        """The name the backend's serving certificate must carry (`<name>.<ns>.svc`)."""
        assert self.service is not None
        return f"{self.service.name}.{self.service.namespace}.svc"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def registration_of(obj: ObjView) -> Registration:
    """The stored APIService `obj` as the aggregator uses it."""
    spec = obj.get("spec") or {}
    service = spec.get("service")
    ref = None
    if isinstance(service, dict):
        port = service.get("port")
        ref = ServiceRef(namespace=str(service.get("namespace") or ""),
                         name=str(service.get("name") or ""),
                         port=port if isinstance(port, int) else DEFAULT_SERVICE_PORT)
    available = any(isinstance(c, dict) and c.get("type") == "Available"
                    and c.get("status") == "True"
                    for c in (obj.get("status") or {}).get("conditions") or [])
    return Registration(name=str(obj["metadata"]["name"]), group=str(spec.get("group") or ""),
                        version=str(spec.get("version") or ""),
                        group_priority=_int(spec.get("groupPriorityMinimum")),
                        version_priority=_int(spec.get("versionPriority")),
                        service=ref, ca_bundle=ca_bundle_bytes(spec),
                        insecure_skip_tls_verify=spec.get("insecureSkipTLSVerify") is True,
                        available=available)


class ApiServiceTable:
    """The registrations by name and by group/version (see the module doc)."""

    def __init__(self, registry: Registry | None = None, *, retry_seconds: float = 1.0,
                 on_change: Callable[[], None] | None = None) -> None:
        self._registry = registry
        self._retry_seconds = retry_seconds
        self._on_change = on_change  # an APIService was added or its spec changed
        self._by_name: dict[str, Registration] = {}
        self._by_gv: dict[str, Registration] = {}

    def replace(self, objects: Iterable[ObjView]) -> None:
        """Hold exactly these APIServices."""
        self._by_name = {}
        for obj in objects:
            self.put(obj)
        self._reindex()

    def put(self, obj: ObjView) -> None:
        reg = registration_of(obj)
        old = self._by_name.get(reg.name)
        self._by_name[reg.name] = reg
        self._reindex()
        if self._on_change is not None and (
                old is None or dataclasses.replace(old, available=reg.available) != reg):
            self._on_change()

    def remove(self, name: str) -> None:
        if self._by_name.pop(name, None) is not None:
            self._reindex()

    def _reindex(self) -> None:
        self._by_gv = {r.group_version: r for r in self._by_name.values()}

    def registrations(self) -> list[Registration]:
        return list(self._by_name.values())

    def remote(self, group_version: str) -> Registration | None:
        """The APIService that sends `group_version` to an extension apiserver, if any."""
        reg = self._by_gv.get(group_version)
        return reg if reg is not None and not reg.local else None

    async def sync(self) -> str:
        """Read every stored APIService; the resourceVersion to watch from."""
        assert self._registry is not None
        listed = await self._registry.list(RESOURCE, None)
        self.replace(listed["items"])
        return str(listed["metadata"]["resourceVersion"])

    async def run(self) -> None:
        """Follow the APIServices for ever (a compacted or broken watch re-lists)."""
        assert self._registry is not None
        while True:
            try:
                rv = await self.sync()
                async for ev in self._registry.watch(RESOURCE, None, resource_version=rv):
                    if ev.type == "DELETED":
                        self.remove(str(ev.object["metadata"]["name"]))
                    elif ev.type in ("ADDED", "MODIFIED"):
                        self.put(ev.object)
            except ApiError as err:
                if err.reason not in (Reason.GONE, Reason.SERVICE_UNAVAILABLE,
                                      Reason.TIMEOUT, Reason.INTERNAL_ERROR):
                    raise
                log.info("re-listing APIServices", extra={"error": err.message})
            await asyncio.sleep(self._retry_seconds)
