"""Leader fencing's vocabulary (Skiff's addition, see skiff.rpc.epoch): the epoch of the
request being served and the Lease key and term it names. etcd.py checks it in every
transaction; the gRPC front sets it.
"""

from __future__ import annotations

import contextvars

from skiff.api.kinds import REGISTRY_PREFIX
from skiff.api.types import Obj
from skiff.rpc.epoch import LeaderEpoch

# The fencing token of the request being served (set by the gRPC front), or None.
leader_epoch: contextvars.ContextVar[LeaderEpoch | None] = contextvars.ContextVar(
    "leader_epoch", default=None)
# How often a write re-checks an epoch whose Lease was renewed in between.
EPOCH_ATTEMPTS = 10


def lease_key(epoch: LeaderEpoch) -> str:
    """The etcd key of the Lease an epoch names."""
    return f"{REGISTRY_PREFIX}leases/{epoch.namespace}/{epoch.name}"


def lease_term(lease: Obj | None) -> tuple[str, int]:
    """A Lease's (holderIdentity, leaseTransitions): what a leader epoch names."""
    spec = (lease or {}).get("spec") or {}
    return str(spec.get("holderIdentity") or ""), int(spec.get("leaseTransitions") or 0)
