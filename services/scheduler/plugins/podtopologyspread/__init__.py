"""PodTopologySpread (SPEC TS1–TS4): DoNotSchedule constraints filter, ScheduleAnyway
constraints score (weight 2), cluster default constraints for owned pods."""

from skiff.scheduler.plugins.podtopologyspread.common import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    OwnerLister,
    PodTopologySpreadArgs,
)
from skiff.scheduler.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["SYSTEM_DEFAULT_CONSTRAINTS", "OwnerLister", "PodTopologySpread",
           "PodTopologySpreadArgs"]
