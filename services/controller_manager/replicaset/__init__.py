"""ReplicaSet (SPEC PS4): availability first — replace a pod as soon as it terminates."""

from skiff.controller_manager.replicaset.controller import ReplicaSetController

__all__ = ["ReplicaSetController"]
