"""Disruption: PodDisruptionBudget status for the eviction subresource and preemption."""

from skiff.controller_manager.disruption.controller import DisruptionController

__all__ = ["DisruptionController"]
