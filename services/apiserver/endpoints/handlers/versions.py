"""A kind served in a version other than the one it is stored in (autoscaling/v1
HorizontalPodAutoscalers, events.k8s.io/v1 Events), for the HTTP front.

Kubernetes stores each kind in one version and converts every request and answer of the
others at the edge. `VersionView` stands in for the registry for one such (kind, version):
objects going in are pruned against that version's fields (so `fieldValidation` warns about
and refuses what that version lacks), converted to the stored version and handed to the
registry; every object coming back — get, list, watch, the answers of writes — is converted
to the version asked for. The registry, the watch cache and the gRPC front see the stored
version only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from skiff.api import ApiError
from skiff.api.errors import FieldError
from skiff.api.groups import autoscaling
from skiff.api.groups import events as eventsv1
from skiff.api.kinds import KindInfo, lookup
from skiff.api.schema import prune_unknown_fields
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, Result
from skiff.apiserver.storage.watchcache import WatchEvent

Convert = Callable[[Obj], Obj]

# (kind, served version) -> (to the stored version, from the stored version)
CONVERSIONS: dict[tuple[str, str], tuple[Convert, Convert]] = {
    ("HorizontalPodAutoscaler", autoscaling.V1): (autoscaling.to_v2, autoscaling.to_v1),
    ("Event", eventsv1.V1): (eventsv1.to_core, eventsv1.to_v1),
}
# Rules a create in that version must also pass (the version's own strategy), by the same key
CREATE_RULES: dict[tuple[str, str], Callable[[Obj], list[FieldError]]] = {
    ("Event", eventsv1.V1): eventsv1.validate_create,
}


def view(registry: Registry, info: KindInfo) -> Registry | VersionView:
    """The registry itself for the stored version, else a converting view of it."""
    if info.api_version == lookup(info.ref).api_version:
        return registry
    return VersionView(registry, info)


def _rewrite(api_version: str) -> Convert:
    def convert(obj: Obj) -> Obj:
        return {**obj, "apiVersion": api_version}
    return convert


def conversion_of(info: KindInfo) -> tuple[Convert, Convert] | None:
    """(to the stored version, from it) for `info`'s version; a custom resource's versions
    differ in apiVersion only (conversion strategy `None`, SPEC EX5)."""
    if info.custom:
        stored = lookup(info.ref).api_version
        if stored == info.api_version:
            return None
        return _rewrite(stored), _rewrite(info.api_version)
    return CONVERSIONS.get((info.kind, info.api_version))


def stored_form(info: KindInfo, obj: Obj) -> Obj:
    """`obj`, read in `info`'s version, as it is stored (for printing its columns)."""
    conversion = conversion_of(info)
    return obj if conversion is None else conversion[0](obj)


class VersionView:
    """The registry's calls for one kind, in a version it is not stored in."""

    def __init__(self, registry: Registry, info: KindInfo) -> None:
        self.registry = registry
        self.info = info
        conversion = conversion_of(info)
        assert conversion is not None, info
        self._in, self._out = conversion

    def __getattr__(self, attr: str) -> Any:  # bind, evict ...: not for these kinds
        return getattr(self.registry, attr)

    def outgoing(self, obj: Obj) -> Obj:
        return self._out(obj)

    def incoming(self, obj: Obj, field_validation: str) -> tuple[Obj, list[str]]:
        """`obj` as stored, and the warnings about fields this version does not have."""
        if not isinstance(obj, dict):
            raise ApiError.bad_request("object: must be a map (a Kubernetes object)")
        obj = dict(obj)
        kind, version = obj.get("kind"), obj.get("apiVersion")
        if kind not in (None, self.info.kind) or version not in (None,
                                                                  self.info.api_version):
            return obj, []  # the registry names what does not match
        obj["kind"], obj["apiVersion"] = self.info.kind, self.info.api_version
        unknown = [] if self.info.custom else prune_unknown_fields(obj)  # (custom: stored
        # version's schema, by the registry)
        if unknown and field_validation == "Strict":
            listed = ", ".join(f'unknown field "{p}"' for p in unknown)
            raise ApiError.bad_request(
                f'{self.info.kind} in version "{self.info.version}" cannot be handled as a '
                f"{self.info.kind}: strict decoding error: {listed}")
        try:
            stored = self._in(obj)
        except ValueError as err:  # a round-trip annotation that is not its JSON
            raise ApiError.bad_request(str(err)) from None
        warnings = [] if field_validation == "Ignore" else [f'unknown field "{p}"'
                                                             for p in unknown]
        return stored, warnings

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A list's or watch's options, its field selector read in this version's labels."""
        return {**options, "api_version": self.info.api_version}

    def _list(self, listed: Obj) -> Obj:
        return {**listed, "apiVersion": self.info.api_version,
                "items": [self._out(item) for item in listed.get("items") or []]}

    async def get(self, resource: str, namespace: str | None, name: str, *,
                  revision: int = 0) -> Obj:
        return self._out(await self.registry.get(resource, namespace, name,
                                                 revision=revision))

    async def list(self, resource: str, namespace: str | None, **options: Any) -> Obj:
        return self._list(await self.registry.list(resource, namespace,
                                                   **self._options(options)))

    async def create(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", **options: Any) -> Result:
        rules = CREATE_RULES.get((self.info.kind, self.info.api_version))
        errors = rules(obj) if rules is not None and isinstance(obj, dict) else []
        if errors:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise ApiError.invalid(self.info.kind, name, errors, group=self.info.group)
        stored, warnings = self.incoming(obj, field_validation)
        result = await self.registry.create(resource, namespace, stored,
                                            field_validation=field_validation, **options)
        return Result(self._out(result.object), warnings + result.warnings)

    async def update(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", **options: Any) -> Result:
        stored, warnings = self.incoming(obj, field_validation)
        result = await self.registry.update(resource, namespace, stored,
                                            field_validation=field_validation, **options)
        return Result(self._out(result.object), warnings + result.warnings)

    async def delete(self, resource: str, namespace: str | None, name: str,
                     **options: Any) -> Obj:
        deleted = await self.registry.delete(resource, namespace, name, **options)
        return {**deleted, "object": self._out(deleted["object"])}

    async def watch(self, resource: str, namespace: str | None,
                    **options: Any) -> AsyncIterator[WatchEvent]:
        async for ev in self.registry.watch(resource, namespace, **self._options(options)):
            yield self.event(ev)

    def event(self, ev: WatchEvent) -> WatchEvent:
        if ev.type == "BOOKMARK":
            obj = {**ev.object, "apiVersion": self.info.api_version}
        else:
            obj = self._out(ev.object)
        return WatchEvent(ev.type, obj, ev.revision)


__all__ = ["CONVERSIONS", "VersionView", "stored_form", "view"]
