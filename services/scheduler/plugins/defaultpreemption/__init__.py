"""DefaultPreemption: the PostFilter that evicts lower-priority pods (SPEC PP4–PP5)."""

from skiff.scheduler.plugins.defaultpreemption.postfilter import DefaultPreemption

__all__ = ["DefaultPreemption"]
