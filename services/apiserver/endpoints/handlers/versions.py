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
from dataclasses import dataclass
from typing import Any, Protocol

from skiff.api import ApiError
from skiff.api.errors import FieldError
from skiff.api.groups import autoscaling
from skiff.api.groups import events as eventsv1
from skiff.api.kinds import KindInfo, lookup
from skiff.api.schema import prune_unknown_fields
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, Result
from skiff.apiserver.registry.strategies.customresource import Converter
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


class Conversion(Protocol):
    """Objects of one kind between the stored version and one served version."""

    async def to_stored(self, obj: Obj) -> Obj: ...

    async def from_stored(self, objs: list[Obj]) -> list[Obj]: ...


@dataclass(frozen=True)
class BuiltInConversion:
    """A built-in kind's pair of converters (CONVERSIONS)."""

    to: Convert
    back: Convert

    async def to_stored(self, obj: Obj) -> Obj:
        return self.to(obj)

    async def from_stored(self, objs: list[Obj]) -> list[Obj]:
        return [self.back(obj) for obj in objs]


@dataclass(frozen=True)
class CustomConversion:
    """A custom resource's versions through its CRD's converter (strategy None: the
    apiVersion rewritten; Webhook: the CRD's conversion webhook, SPEC EX5). Objects already
    in the wanted version (a stored object written before the storage version changed
    may not be) are left as they are."""

    converter: Converter
    stored: str  # the stored apiVersion
    served: str  # the requested one

    async def to_stored(self, obj: Obj) -> Obj:
        return (await self.converter.convert([obj], self.stored))[0]

    async def from_stored(self, objs: list[Obj]) -> list[Obj]:
        return await self.converter.convert(objs, self.served)


def view(registry: Registry, info: KindInfo) -> Registry | VersionView:
    """The registry itself for the stored version, else a converting view of it (always
    for a custom resource with several versions: its stored objects may be in another)."""
    conversion = conversion_of(registry, info)
    if conversion is None:
        return registry
    return VersionView(registry, info, conversion)


def conversion_of(registry: Registry, info: KindInfo) -> Conversion | None:
    """How `info`'s version is converted to and from the stored one (None: it is that)."""
    if info.custom:
        strategy = registry.strategies.of(info)
        converter = getattr(strategy, "converter", None)
        if converter is None or not converter.several_versions:
            return None
        return CustomConversion(converter, lookup(info.ref).api_version, info.api_version)
    pair = CONVERSIONS.get((info.kind, info.api_version))
    return None if pair is None else BuiltInConversion(*pair)


def stored_form(info: KindInfo, obj: Obj) -> Obj:
    """`obj`, read in `info`'s version, as it is stored (for printing its columns; a custom
    resource's printer columns are read as served)."""
    pair = None if info.custom else CONVERSIONS.get((info.kind, info.api_version))
    return obj if pair is None else pair[0](obj)


class VersionView:
    """The registry's calls for one kind, in a version it is not stored in."""

    def __init__(self, registry: Registry, info: KindInfo, conversion: Conversion) -> None:
        self.registry = registry
        self.info = info
        self._conversion = conversion

    async def _out(self, obj: Obj) -> Obj:
        return (await self._conversion.from_stored([obj]))[0]

    def __getattr__(self, attr: str) -> Any:  # bind, evict ...: not for these kinds
        return getattr(self.registry, attr)

    async def incoming(self, obj: Obj, field_validation: str) -> tuple[Obj, list[str]]:
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
            stored = await self._conversion.to_stored(obj)
        except ValueError as err:  # a round-trip annotation that is not its JSON
            raise ApiError.bad_request(str(err)) from None
        warnings = [] if field_validation == "Ignore" else [f'unknown field "{p}"'
                                                             for p in unknown]
        return stored, warnings

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A list's or watch's options, its field selector read in this version's labels."""
        return {**options, "api_version": self.info.api_version}

    async def _list(self, listed: Obj) -> Obj:
        return {**listed, "apiVersion": self.info.api_version,
                "items": await self._conversion.from_stored(listed.get("items") or [])}

    async def get(self, resource: str, namespace: str | None, name: str, *,
                  revision: int = 0, allow_cached: bool | None = None) -> Obj:
        # None: a read of the apiserver's own (an update's), not a client's (issue 35's record)
        cached = {} if allow_cached is None else {"allow_cached": allow_cached}
        return await self._out(await self.registry.get(resource, namespace, name,
                                                 revision=revision, **cached))

    async def list(self, resource: str, namespace: str | None, **options: Any) -> Obj:
        return await self._list(await self.registry.list(resource, namespace,
                                                   **self._options(options)))

    async def create(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", **options: Any) -> Result:
        rules = CREATE_RULES.get((self.info.kind, self.info.api_version))
        errors = rules(obj) if rules is not None and isinstance(obj, dict) else []
        if errors:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise ApiError.invalid(self.info.kind, name, errors, group=self.info.group)
        stored, warnings = await self.incoming(obj, field_validation)
        result = await self.registry.create(resource, namespace, stored,
                                            field_validation=field_validation, **options)
        return Result(await self._out(result.object), warnings + result.warnings)

    async def update(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", **options: Any) -> Result:
        stored, warnings = await self.incoming(obj, field_validation)
        result = await self.registry.update(resource, namespace, stored,
                                            field_validation=field_validation, **options)
        return Result(await self._out(result.object), warnings + result.warnings)

    async def delete(self, resource: str, namespace: str | None, name: str,
                     **options: Any) -> Obj:
        deleted = await self.registry.delete(resource, namespace, name, **options)
        return {**deleted, "object": await self._out(deleted["object"])}

    async def watch(self, resource: str, namespace: str | None,
                    **options: Any) -> AsyncIterator[WatchEvent]:
        async for ev in self.registry.watch(resource, namespace, **self._options(options)):
            yield await self.event(ev)

    async def event(self, ev: WatchEvent) -> WatchEvent:
        if ev.type == "BOOKMARK":
            obj = {**ev.object, "apiVersion": self.info.api_version}
        else:
            obj = await self._out(ev.object)
        return WatchEvent(ev.type, obj, ev.revision)


__all__ = ["CONVERSIONS", "VersionView", "stored_form", "view"]
