"""Node lifecycle (SPEC PS2): node health from Leases, lifecycle taints, taint eviction."""

from skiff.controller_manager.nodelifecycle.controller import NodeLifecycleController
from skiff.controller_manager.nodelifecycle.tainteviction import (
    TaintEvictionController,
    eviction_time,
)

__all__ = ["NodeLifecycleController", "TaintEvictionController", "eviction_time"]
