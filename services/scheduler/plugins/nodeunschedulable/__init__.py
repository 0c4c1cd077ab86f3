"""NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take no new pods."""

from skiff.scheduler.plugins.nodeunschedulable.filtering import NodeUnschedulable

__all__ = ["NodeUnschedulable"]
