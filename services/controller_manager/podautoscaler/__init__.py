"""HorizontalPodAutoscalers: a workload's replicas follow its pods' resource usage."""

from skiff.controller_manager.podautoscaler.controller import HorizontalController

__all__ = ["HorizontalController"]
