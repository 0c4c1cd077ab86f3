"""Which resource a workload's kind or resource name is, and whether it is namespaced, for a
process that does not follow CustomResourceDefinitions (`skiff explore`, its steps and its
snapshots).

`skiff.client.ApiClient` resolves an object's kind through this process's kind table
(`skiff.api.kinds`), which knows only the built-in kinds until someone registers the custom
ones. A workload names custom resources (`databases.examples.skiff.io`) whose CRD its own
setup created a moment ago, so on a miss this reads the cluster's established CRDs and
registers their kinds (as `skiff.client.customkinds` does from an informer), then looks
again — and, for a step, waits a while for a CRD of that name that is created but not yet
established (kubectl would fail there; a workload is clearer without a wait for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.errors import ApiError
from skiff.api.kinds import KindInfo, all_kinds, lookup, lookup_kind, register_custom
from skiff.api.types import Obj, ObjView
from skiff.client.customkinds import RESOURCE as CRDS
from skiff.client.customkinds import established
from skiff.client.interface import Client

__all__ = ["POLL_SECONDS", "kind_of", "refresh_custom_kinds", "resource_info"]

POLL_SECONDS = 0.1


async def refresh_custom_kinds(client: Client) -> list[Obj]:
    """Register the kinds of every CRD the cluster serves now in this process's table;
    the CRDs not established yet are returned."""
    pending = []
    for crd in (await client.list_pages(CRDS))["items"]:
        if not established(crd):
            pending.append(crd)
            continue
        stored, served = kind_infos(crd)
        if stored.kind and stored.resource:
            register_custom(stored, served)
    return pending


def _known(resource: str) -> KindInfo | None:
    """`resource` in this process's table: any name `lookup` resolves, or kubectl's
    `<plural>.<group>` of a built-in kind (`deployments.apps`)."""
    try:
        return lookup(resource)
    except ApiError:
        pass
    plural, _, group = resource.partition(".")
    for info in all_kinds():
        if group and info.resource == plural and info.group == group:
            return info
    return None


def _known_kind(api_version: str, kind: str) -> KindInfo | None:
    try:
        return lookup_kind(api_version, kind)
    except ApiError:
        return None


async def _learn(client: Client, find: Callable[[], KindInfo | None],
                 names: Callable[[ObjView], bool], wait: float) -> KindInfo | None:
    """`find()`, again after reading the cluster's CRDs; while a CRD `names` is created
    but not established yet, again every POLL_SECONDS for up to `wait` seconds."""
    if (info := find()) is not None:
        return info
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        pending = await refresh_custom_kinds(client)
        if (info := find()) is not None:
            return info
        if not any(names(crd) for crd in pending) or loop.time() >= deadline:
            return None
        await asyncio.sleep(POLL_SECONDS)


def _crd_names(crd: ObjView) -> tuple[str, str, set[str]]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    aliases = {str(names.get(key, "")).lower() for key in ("plural", "singular", "kind")}
    aliases |= {str(n).lower() for n in names.get("shortNames") or []}
    return str(spec.get("group", "")), str(names.get("kind", "")), aliases


async def resource_info(client: Client, resource: str, *,
                        wait: float = 0.0) -> KindInfo | None:
    """The kind a resource name (`configmaps`, `deployments.apps`,
    `databases.examples.skiff.io`, `Database`) names, or None when the cluster serves no
    such resource (after up to `wait` seconds for a CRD of that name to be established)."""
    def names(crd: ObjView) -> bool:
        group, _, aliases = _crd_names(crd)
        lowered = resource.lower()
        return lowered in aliases or any(lowered == f"{a}.{group}" for a in aliases)
    return await _learn(client, lambda: _known(resource), names, wait)


async def kind_of(client: Client, *, api_version: str, kind: str,
                  wait: float = 0.0) -> KindInfo | None:
    """The kind an object's apiVersion and kind name, or None when none is served (after
    up to `wait` seconds for a CRD of that group and kind to be established)."""
    def names(crd: ObjView) -> bool:
        group, crd_kind, _ = _crd_names(crd)
        return crd_kind == kind and group == api_version.rpartition("/")[0]
    return await _learn(client, lambda: _known_kind(api_version, kind), names, wait)
