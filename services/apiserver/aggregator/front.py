"""What the HTTP front asks of the aggregation layer (SPEC EX8): whether a path belongs to
a group/version an APIService sends elsewhere (`target`), the `/apis` groups with the
aggregated ones merged in (`api_groups`), and the proxied answer (`proxy`): the request is
authorized here first, as kube-apiserver's handler chain authorizes every request before
the aggregator's proxy sees it (so `kubectl top`-style reads need RBAC on the extension's
group here too), then handed to the extension apiserver with the user in front-proxy
headers. `run` publishes the front proxy's trust for extension apiservers, follows the
APIServices and keeps their availability current.
"""

from __future__ import annotations

import asyncio

from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.client import ServiceResolver
from skiff.apiserver.aggregator import authtrust
from skiff.apiserver.aggregator.authtrust import AuthenticationTrust
from skiff.apiserver.aggregator.availability import AvailabilityController
from skiff.apiserver.aggregator.discovery import merge_groups
from skiff.apiserver.aggregator.proxy import (
    NO_CERTIFICATE,
    Proxier,
    ProxyClientCertificate,
    Resolver,
)
from skiff.apiserver.aggregator.table import ApiServiceTable, Registration
from skiff.apiserver.auth import reviews
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.endpoints.guard import RequestGuard
from skiff.apiserver.endpoints.http import Request, Response
from skiff.apiserver.registry.store import Registry


def request_parts(rest: list[str]) -> tuple[str | None, str, str, str]:
    """A resource path below `/apis/<group>/<version>` as kube's RequestInfo reads it:
    (namespace, resource, name, subresource)."""
    namespace: str | None = None
    if rest and rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    padded = [*rest, "", "", ""]
    return namespace, padded[0], padded[1], "/".join(rest[2:])


class Aggregator:
    """The aggregation layer of one apiserver process."""

    def __init__(self, registry: Registry, *,
                 certificate: ProxyClientCertificate = NO_CERTIFICATE,
                 check_interval: float = 10.0, resolver: Resolver | None = None,
                 trust: AuthenticationTrust | None = None) -> None:
        self.registry = registry
        self.trust = trust
        self.proxier = Proxier(resolver or ServiceResolver(registry.storage),
                               certificate=certificate)
        self.availability = AvailabilityController(registry, self.proxier,
                                                   interval=check_interval)
        self.table = ApiServiceTable(registry, on_change=self.availability.wake)

    async def run(self) -> None:
        """Publish the front proxy's trust, follow the APIServices and check their
        availability, until cancelled."""
        if self.trust is not None:
            await authtrust.publish(self.registry, self.trust)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.table.run(), name="apiservice-table")
                tg.create_task(self.availability.run(), name="apiservice-availability")
        finally:
            await self.proxier.close()

    def target(self, path: str) -> Registration | None:
        """The remote APIService serving `path` (`/apis/<group>/<version>[/...]`, or its
        OpenAPI v3 document `/openapi/v3/apis/<group>/<version>`), if any."""
        parts = path.strip("/").split("/")
        if parts[:2] == ["openapi", "v3"] and len(parts) == 5:
            parts = parts[2:]
        if len(parts) < 3 or parts[0] != "apis":
            return None
        return self.table.remote(f"{parts[1]}/{parts[2]}")

    def openapi_v3_paths(self) -> dict[str, Obj]:
        """`/openapi/v3`'s entries of the aggregated group/versions (their documents are
        the extension apiservers' own, proxied)."""
        return {f"apis/{r.group_version}": {
            "serverRelativeURL": f"/openapi/v3/apis/{r.group_version}"}
            for r in self.table.registrations() if not r.local and r.group}

    def api_groups(self, served: list[Obj]) -> list[Obj]:
        """`/apis`' groups: `served` and the aggregated ones."""
        return merge_groups(served, self.table.registrations())

    async def proxy(self, req: Request, reg: Registration, *,
                    guard: RequestGuard | None) -> Response:
        rest = [p for p in req.path.strip("/").split("/")[3:] if p]
        query = req.query
        if rest[:1] == ["watch"]:  # the deprecated /watch/ paths: a watch of the rest
            rest, query = rest[1:], {**query, "watch": "true"}
        if rest and guard is not None and not req.path.startswith("/openapi/"):
            namespace, resource, name, sub = request_parts(rest)
            await guard.http_resource(method=req.method, query=query, group=reg.group,
                                      resource=resource, namespace=namespace, name=name,
                                      subresource=sub)
        user = current_user.get() or reviews.ANONYMOUS_ADMIN
        return await self.proxier.forward(reg, req, user)
