"""Job: pods run to completion, with backoffLimit, deadlines, TTL and podFailurePolicy."""

from skiff.controller_manager.job.controller import JobController

__all__ = ["JobController"]
