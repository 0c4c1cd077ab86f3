"""The end state of one `skiff explore` run (SPEC CT2): the objects of the kinds the oracle
compares, read from the cluster once the controller has settled. Namespaced kinds are read
in the workload's namespaces only (the rest of a fresh cluster is not the controller's
doing); cluster-scoped kinds whole. A kind the cluster does not serve in this run (its CRD
never got created) is an empty list: that difference is the oracle's to report, not an
error.
"""

from __future__ import annotations

from collections.abc import Sequence

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj, ObjView
from skiff.client.interface import Client
from skiff.explore.kinds import resource_info

__all__ = ["Snapshot", "object_key", "take_snapshot"]

Snapshot = dict[str, list[Obj]]  # resource → its objects, sorted by namespace/name


def object_key(obj: ObjView) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


async def take_snapshot(client: Client, resources: Sequence[str], *,
                        namespaces: Sequence[str]) -> Snapshot:
    """Every object of `resources` (as the caller names them: the snapshot's keys) in
    `namespaces` (cluster-scoped ones: all), each sorted by namespace and name."""
    snapshot: Snapshot = {}
    for resource in resources:
        info = await resource_info(client, resource)
        objects: list[Obj] = []
        if info is not None:
            scopes: Sequence[str | None] = namespaces if info.namespaced else [None]
            for namespace in scopes:
                try:
                    objects.extend((await client.list_pages(info.ref, namespace))["items"])
                except ApiError as err:
                    if err.reason != Reason.NOT_FOUND:
                        raise
        snapshot[resource] = sorted(objects, key=object_key)
    return snapshot
