"""ResourceQuota usage: `status.hard` and `status.used` of each quota, recounted."""

from skiff.controller_manager.resourcequota.controller import ResourceQuotaController

__all__ = ["ResourceQuotaController"]
