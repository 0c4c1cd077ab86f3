"""The garbage collector: dependents follow their owners (ownerReferences), as in Kubernetes."""

from skiff.controller_manager.garbagecollector.controller import GarbageCollector

__all__ = ["GarbageCollector"]
