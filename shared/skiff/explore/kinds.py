"""Which resource a workload's kind or resource name is, and whether it is namespaced, for a
process that does not follow CustomResourceDefinitions (`skiff explore`, its steps and its
snapshots).

`skiff.client.ApiClient` resolves an object's kind through this process's kind table
(`skiff.api.kinds`), which knows only the built-in kinds until someone registers the custom
ones. A workload names custom resources (`databases.examples.skiff.io`) whose CRD its own
setup created a moment ago, so on a miss this reads the cluster's established CRDs once and
registers their kinds (as `skiff.client.customkinds` does from an informer), then looks
again.
"""

from __future__ import annotations

from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.errors import ApiError
from skiff.api.kinds import KindInfo, all_kinds, lookup, lookup_kind, register_custom
from skiff.client.customkinds import RESOURCE as CRDS
from skiff.client.customkinds import established
from skiff.client.interface import Client

__all__ = ["kind_of", "refresh_custom_kinds", "resource_info"]


async def refresh_custom_kinds(client: Client) -> None:
    """Register the kinds of every CRD the cluster serves now in this process's table."""
    for crd in (await client.list_pages(CRDS))["items"]:
        if not established(crd):
            continue
        stored, served = kind_infos(crd)
        if stored.kind and stored.resource:
            register_custom(stored, served)


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


async def resource_info(client: Client, resource: str) -> KindInfo | None:
    """The kind a resource name (`configmaps`, `deployments.apps`,
    `databases.examples.skiff.io`, `Database`) names, or None when the cluster serves no
    such resource."""
    if (info := _known(resource)) is not None:
        return info
    await refresh_custom_kinds(client)
    return _known(resource)


async def kind_of(client: Client, *, api_version: str, kind: str) -> KindInfo | None:
    """The kind an object's apiVersion and kind name, or None when none is served."""
    try:
        return lookup_kind(api_version, kind)
    except ApiError:
        pass
    await refresh_custom_kinds(client)
    try:
        return lookup_kind(api_version, kind)
    except ApiError:
        return None
