"""Attach/detach (SPEC SC1): a ReadWriteOnce volume is attached to at most one node."""

from skiff.controller_manager.attachdetach.controller import AttachDetachController
from skiff.controller_manager.attachdetach.plan import (
    AttachPlan,
    may_detach,
    plan_attach,
    volume_name,
)

__all__ = ["AttachDetachController", "AttachPlan", "may_detach", "plan_attach", "volume_name"]
