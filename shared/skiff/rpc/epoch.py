"""The leader epoch: Skiff's fencing token for leader-only writes (beyond Kubernetes).

A leader-elected component (controller-manager, scheduler) sends its epoch — the Lease it
holds, its holderIdentity and the Lease's leaseTransitions when it took it — as gRPC metadata
`skiff-leader-epoch` on every write that can destroy (a binding, a delete with grace 0, any
write of a Fence or VolumeAttachment). The apiserver checks in the same etcd transaction as
the write that the Lease still names that holder with those transitions, so a deposed leader
that wakes up late (it still believes it leads) is refused with 403 Forbidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.api.errors import ApiError

EPOCH_METADATA = "skiff-leader-epoch"


@dataclass(frozen=True)
class LeaderEpoch:
    namespace: str
    name: str  # the Lease
    holder: str  # its holderIdentity
    transitions: int  # its leaseTransitions when this holder took it

    def encode(self) -> str:
        return f"{self.namespace}/{self.name}/{self.transitions}/{self.holder}"

    @classmethod
    def decode(cls, value: str) -> LeaderEpoch:
        parts = value.split("/", 3)
        if len(parts) != 4 or not all(parts) or not parts[2].isdigit():
            raise ApiError.bad_request(
                f"{EPOCH_METADATA}: {value!r} is not NAMESPACE/LEASE/TRANSITIONS/HOLDER")
        return cls(parts[0], parts[1], parts[3], int(parts[2]))

    def describe(self) -> str:
        return (f"Lease {self.namespace}/{self.name} held by {self.holder!r} with "
                f"leaseTransitions {self.transitions}")
