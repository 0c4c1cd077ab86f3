"""CronJobs: Jobs created on a cron schedule."""

from skiff.controller_manager.cronjob.controller import CronJobController

__all__ = ["CronJobController"]
