"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from skiff.scheduler.plugins.tainttoleration.filtering import TaintTolerationFilter
from skiff.scheduler.plugins.tainttoleration.scoring import TaintTolerationScore


class TaintToleration(TaintTolerationFilter, TaintTolerationScore):
    name = "TaintToleration"


__all__ = ["TaintToleration"]
