"""What differs between kinds, as Kubernetes' REST strategies (`pkg/registry/<group>/<kind>/
strategy.go`) say it to the generic store: one `Strategy` per resource, asked by the store
(store.py) at each point where kinds differ, so the store has no `if kind ==`.

The base class is the generic strategy every kind without its own gets: the client's status
is kept on create (and the zero status Kubernetes gives some kinds is set), the object and
its status are served as subresources, an update is validated as a whole, deletion is
immediate unless finalizers hold it (graceful.py), and nothing is allocated beside it.
A kind with its own rules overrides the hooks in its module under strategies/, and is
listed in strategies/catalog.py. `merge_update` is what an update of the object or of one
of its subresources may change (SPEC AS8), asking the strategy for the others.
"""

from __future__ import annotations

from typing import ClassVar

from skiff.api import ApiError, apply_defaults, prune_unknown_fields, tables, validate
from skiff.api.defaults import initial_status
from skiff.api.errors import FieldError
from skiff.api.fieldlabels import KindFieldLabels
from skiff.api.kinds import GENERATION_KINDS, KindInfo
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj

# The subresources every kind with a status serves through the object's own verbs.
OBJECT_SUBRESOURCES = frozenset({"", "status"})


class Held:
    """What one write took beside its object; nothing, unless a strategy says otherwise."""

    async def give_back(self) -> None:
        """The write was not stored: free what it took."""

    async def commit(self) -> None:
        """The write was stored: free what the object held before and no longer does."""


NOTHING_HELD = Held()


class Strategy:
    """The generic strategy; `kind` names the resource it serves."""

    # Whether the status a client sends on create is dropped (a controller or the kubelet
    # owns it), as these kinds' PrepareForCreate does.
    reset_status_on_create: ClassVar[bool] = False
    # Subresources read and written through `get` and `update` of the object itself.
    object_subresources: ClassVar[frozenset[str]] = OBJECT_SUBRESOURCES

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @property
    def generation(self) -> bool:
        """Whether the kind counts `metadata.generation` (bumped on a spec change)."""
        return self.kind in GENERATION_KINDS

    def serves(self, subresource: str) -> bool:
        """Whether requests to `subresource` read and write the object itself."""
        return subresource in self.object_subresources

    def default(self, obj: Obj) -> None:
        """Kubernetes' defaults for the kind, in place (the store's copy)."""
        apply_defaults(obj)

    def prune_unknown(self, obj: Obj) -> list[str]:
        """Drop the fields the kind's schema does not have; their paths, in order."""
        return prune_unknown_fields(obj)

    def validate_create(self, obj: Obj) -> list[FieldError]:
        """Validate: the whole object being created."""
        return validate(obj)

    def spec_changed(self, old: Obj, new: Obj) -> bool:
        """Whether an update changes what `metadata.generation` counts (all but metadata
        and status)."""
        skip = {"metadata", "status", "apiVersion", "kind"}
        return ({k: v for k, v in old.items() if k not in skip}
                != {k: v for k, v in new.items() if k not in skip})

    def field_labels(self) -> KindFieldLabels | None:
        """The field labels a field selector may name (None: the kind's table in
        skiff.api.fieldlabels)."""
        return None

    def scale_paths(self) -> tuple[str, str, str] | None:
        """A custom resource's scale subresource paths (see customresource.py); None for
        the built-in kinds, whose scale the HTTP front knows."""
        return None

    def prepare_for_create(self, obj: Obj) -> None:
        """PrepareForCreate: the status the object starts with."""
        if self.reset_status_on_create:
            obj.pop("status", None)
        status = initial_status(self.kind)  # the zero status
        if status is not None:
            obj["status"] = status

    def merge_subresource(self, old: Obj, new: Obj, subresource: str) -> Obj:
        """The object an update of `subresource` (one `serves` names, other than the
        object and its status) stores: none by default."""
        raise ApiError.bad_request(f"subresource {subresource!r} is not supported")

    def prepare_for_update(self, old: Obj, new: Obj, *, subresource: str) -> None:
        """PrepareForUpdate: fields a write may not change, carried over from `old`
        (after the store kept spec and status apart); nothing by default."""

    def validate_update(self, new: Obj, old: Obj, *, subresource: str) -> list[FieldError]:
        """ValidateUpdate: the whole object against the stored one."""
        return validate(new, old=old)

    async def before_write(self, info: KindInfo, obj: Obj, old: Obj | None, *,
                           request_name: str | None) -> None:
        """A check of the writer's rights over the object, before admission (RBAC's
        escalation check); `request_name`: the name on a create's URL. None by default."""

    def finalizers_on_delete(self, current: Obj) -> list[str]:
        """Finalizers a DELETE adds before it decides (a CRD's cleanup); none by default."""
        return []

    def delete_grace_period(self, current: Obj, requested: int | None) -> int | None:
        """The grace period a DELETE gets (0: deleted now, unless finalizers hold it)."""
        return 0

    async def allocate(self, obj: Obj, *, dry_run: bool) -> Held:
        """Take what a created object holds beside itself (cluster IPs, node ports)."""
        return NOTHING_HELD

    async def allocate_update(self, old: Obj, new: Obj, *, subresource: str,
                              dry_run: bool) -> Held:
        """Take what an update newly holds (freed again by `Held.commit` when it no longer
        needs what `old` held)."""
        return NOTHING_HELD

    async def released(self, obj: Obj) -> None:
        """The object was deleted: free what it held."""

    def columns(self, *, wide: bool) -> list[tables.Column]:
        """The table columns of `skiff get` and server-side Table output."""
        return tables.columns_for(self.kind, wide=wide)

    def kubectl_columns(self) -> set[str]:
        """The names of the columns kubectl prints without `-o wide` (priority 0)."""
        return {name for name, _ in tables.COLUMNS.get(self.kind, tables.DEFAULT_COLUMNS)}


def merge_update(info: KindInfo, strategy: Strategy, old: Obj, new_in: Obj,
                 subresource: str) -> Obj:
    """AS8: a spec write keeps the stored status; a status write keeps everything else;
    another subresource's write changes what its strategy says (a Pod's
    `ephemeralcontainers`: only `spec.ephemeralContainers`)."""
    if subresource == "status":
        merged = deep_copy(old)
        merged["status"] = deep_copy(new_in.get("status", {}))
        return merged
    if subresource:
        return strategy.merge_subresource(old, new_in, subresource)
    new = deep_copy(new_in)
    meta, old_meta = new["metadata"], old["metadata"]
    for fixed in ("uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
        if fixed in old_meta:
            meta[fixed] = old_meta[fixed]
        else:
            meta.pop(fixed, None)
    if info.has_status:
        if "status" in old:
            new["status"] = deep_copy(old["status"])
        else:
            new.pop("status", None)
    return new
