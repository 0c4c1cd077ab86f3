"""What storage hands the registry and the watch cache: keys with their revisions, pages of
a list, raw change events, and the errors and messages storage answers with.

These are the values of the `Storage` seam (see interface.py): etcd (etcd.py) and the
in-memory store (memory.py) both speak them. Values are msgpack; `metadata.resourceVersion`
is never stored, it is the key's `mod_revision` on read.

Bounds (SPEC AU10): a read or watch at a revision etcd has compacted is 410 Expired with
Kubernetes' messages ("The resourceVersion for the provided list is too old."); a write
refused by etcd's space quota (its NOSPACE alarm) is a 500 Status carrying etcd's message,
"etcdserver: mvcc: database space exceeded", as kube-apiserver answers, while reads and
deletes go on working. `COMPACT_REV_KEY` is the key whose compare-and-swap lets several
apiservers share one compaction per interval (see compaction.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.rpc import codec

# Range reads are paginated: at most this many keys a request.

LIST_PAGE = 500

# Kubernetes' message for a 504 Timeout (apimachinery's generic 504 answer): a write whose
# outcome this apiserver cannot know.
MAY_STILL_BE_PROCESSING = ("the server was unable to return a response in the time "
                           "allotted, but may still be processing the request")

# Kubernetes' answers for a read or watch at a compacted revision (etcd3/errors.go).
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
EXPIRED_WATCH = "The resourceVersion for the provided watch is too old."
# A read of one object at a past revision is Skiff's (`skiff get --at-revision`): the
# same answer, naming the get.
EXPIRED_GET = "The resourceVersion for the provided get is too old."
# etcd's own message for a write refused by its space quota, which kube-apiserver passes on.
NO_SPACE = "etcdserver: mvcc: database space exceeded"
# The key whose version counts the compactions of all apiservers (Kubernetes' name).
COMPACT_REV_KEY = b"compact_rev_key"


@dataclass(frozen=True)
class KeyValue:
    key: str
    obj: Obj | None  # None for a deletion
    mod_revision: int
    create_revision: int


@dataclass(frozen=True)
class ListPage:
    items: list[KeyValue]
    revision: int  # the revision every page of this list is read at
    more: bool
    next_key: bytes  # where the next page starts (empty when there is none)
    remaining: int  # keys in the range after this page


class RawEvent:
    """One etcd change under /registry/. The values are decoded when first read (`obj`,
    `prev`): the watch cache sees every change of every kind, and most are read by no
    watcher (Events, Leases) or only by some (a previous value matters to selectors)."""

    __slots__ = ("revision", "key", "type", "created", "wire", "_obj", "_prev", "_value",
                 "_prev_value", "_prev_revision")

    def __init__(self, revision: int, key: str, type: str, obj: Obj | None,  # noqa: A002
                 prev: Obj | None, created: bool, *, value: bytes | None = None,
                 prev_value: bytes | None = None, prev_revision: int = 0) -> None:
        self.revision = revision
        self.key = key
        self.type = type  # "PUT" | "DELETE"
        self.created = created  # PUT that created the key
        # Encoded watch messages of this event by type, shared by every watcher that gets
        # the same object (one encode per event instead of one per watcher).
        self.wire: dict[str, bytes] = {}
        self._obj, self._prev = obj, prev
        self._value, self._prev_value, self._prev_revision = value, prev_value, prev_revision

    @property
    def obj(self) -> Obj | None:
        """The new value (None on DELETE)."""
        if self._value is not None:
            self._obj, self._value = decode_value(self._value, self.revision), None
        return self._obj

    @property
    def has_prev(self) -> bool:
        """Whether the previous value is known, without decoding it."""
        return self._prev_value is not None or self._prev is not None

    @property
    def prev(self) -> Obj | None:
        """The previous value when etcd still has it."""
        if self._prev_value is not None:
            self._prev = decode_value(self._prev_value, self._prev_revision)
            self._prev_value = None
        return self._prev

    def __repr__(self) -> str:
        return f"RawEvent({self.revision}, {self.key!r}, {self.type!r})"


def ambiguous_write_error() -> ApiError:
    """A write that may or may not have been committed (see the module doc)."""
    return ApiError(Reason.TIMEOUT, MAY_STILL_BE_PROCESSING)


def no_space_error() -> ApiError:
    """What a write gets while etcd's NOSPACE alarm is raised: kube-apiserver's 500 with
    etcd's message (reads and deletes still work; an operator compacts, defragments and
    disarms the alarm)."""
    return ApiError(Reason.INTERNAL_ERROR, NO_SPACE)


def decode_value(value: bytes, mod_revision: int) -> Obj:
    obj = codec.decode_map(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(mod_revision)
    return obj


def encode_value(obj: Obj) -> bytes:
    meta = obj.get("metadata", {})
    if "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return codec.encode(obj)


class LeaderFenced(ApiError):
    """A deposed leader's write, refused by its epoch (SPEC CP4): a Conflict that retrying
    cannot cure, so the registry passes it on instead of re-reading and trying again."""
