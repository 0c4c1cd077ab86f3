"""The seam between a component and the apiserver: the `Client` protocol (client-go's
`kubernetes.Interface`).

Controllers, the scheduler, the fence agent, informers, event recorders and leader election
take a `Client`, not the gRPC `ApiClient` itself, so that unit tests hand them the in-memory
`FakeClient` (skiff.client.fake) and production hands them the real one. Both implement
every verb below with the same signatures and the same errors (`ApiError` with Kubernetes'
reasons: NotFound, AlreadyExists, Conflict on a stale resourceVersion, ...); mypy checks
that the real client satisfies the protocol.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from skiff.api.types import Obj
from skiff.client.credentials import Credentials
from skiff.rpc.epoch import LeaderEpoch

__all__ = ["Client", "WatchEvent"]


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: Obj

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))


class Client(Protocol):
    """What components call on the API. Objects go in and come out as fresh dicts: a caller
    may change what it got back without touching anyone else's copy."""

    # A LeaderElector sets it on the clients its owner writes with while it leads; fenced
    # writes then carry it (skiff.rpc.epoch).
    leader_epoch: LeaderEpoch | None

    @property
    def credentials(self) -> Credentials:
        """Whom this client trusts and who it is (the cluster CA among them)."""

    @property
    def generation(self) -> int:
        """Counts connection replacements (see `reconnect`)."""

    async def reconnect(self, *, generation: int | None = None) -> None:
        """Drop a connection that went silent (once per `generation`)."""

    async def create(self, obj: Obj, *, namespace: str | None = None,
                     field_validation: str = "Warn") -> Obj: ...

    async def get(self, resource: str, name: str, namespace: str | None = None, *,
                  revision: int = 0) -> Obj: ...

    async def list(self, resource: str, namespace: str | None = None, *,
                   label_selector: str = "", field_selector: str = "",
                   revision: int = 0, limit: int = 0, continue_token: str = "") -> Obj:
        """A `<Kind>List`: `items` and `metadata.resourceVersion` (and `continue`)."""

    async def list_pages(self, resource: str, namespace: str | None = None, *,
                         label_selector: str = "", field_selector: str = "",
                         page_size: int = 500) -> Obj:
        """The whole list at one revision, fetched a page at a time."""

    async def update(self, obj: Obj, *, field_validation: str = "Warn") -> Obj:
        """Replace the object (not its status, for kinds with a status subresource); a
        stale `metadata.resourceVersion` is a Conflict."""

    async def update_status(self, obj: Obj) -> Obj:
        """Replace the status subresource only."""

    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     resource_version: str | None = None,
                     propagation_policy: str | None = None) -> Obj:
        """`{"object": ..., "deleted": bool}`: deleted is False while it is terminating."""

    async def bind(self, namespace: str, name: str, node_name: str, *,
                   uid: str | None = None) -> Obj:
        """The pods/binding subresource: set the pod's node."""

    async def evict(self, namespace: str, name: str, *,
                    grace_period_seconds: int | None = None) -> Obj:
        """The pods/eviction subresource (PodDisruptionBudgets are honoured)."""

    async def history(self, resource: str, name: str,
                      namespace: str | None = None) -> builtins.list[Obj]:
        """Every stored version: `[{"revision", "type", "object"}]`, oldest first."""

    async def create_token(self, namespace: str, name: str, request: Obj) -> Obj:
        """A TokenRequest for ServiceAccount `namespace/name`."""

    async def pod_metrics(self, namespace: str, *,
                          label_selector: str = "") -> builtins.list[Obj]:
        """metrics.k8s.io PodMetrics of the namespace's pods matching the selector."""

    async def discovery(self) -> builtins.list[Obj]:
        """The resources the apiserver serves."""

    def watch(self, resource: str, namespace: str | None = None, *,
              resource_version: str = "", label_selector: str = "",
              field_selector: str = "", name: str = "",
              allow_bookmarks: bool = True, timeout_seconds: int | None = None,
              coalesce: bool = False) -> AsyncGenerator[WatchEvent, None]:
        """One watch stream from `resource_version`; Gone for a compacted one. `coalesce`:
        this watcher may get its events up to one of the apiserver's `--watch-coalesce`
        ticks late while the stream is busy, in fewer messages (issue 37)."""
