"""ReplicaSet (SPEC PS4): availability first — replace a pod as soon as it terminates.
ReplicationControllers run on the same controller."""

from skiff.controller_manager.replicaset.controller import (
    ReplicaSetController,
    ReplicationManager,
)

__all__ = ["ReplicaSetController", "ReplicationManager"]
