"""NodeResourcesFit: pod count and every requested resource must fit; least-allocated
nodes score best. NodeResourcesBalancedAllocation: nodes whose cpu and memory stay
balanced score best."""

from skiff.scheduler.plugins.noderesources.balanced_allocation import (
    NodeResourcesBalancedAllocation,
)
from skiff.scheduler.plugins.noderesources.filtering import (
    NodeResourcesFitArgs,
    NodeResourcesFitFilter,
)
from skiff.scheduler.plugins.noderesources.scoring import NodeResourcesFitScore


class NodeResourcesFit(NodeResourcesFitFilter, NodeResourcesFitScore):
    name = "NodeResourcesFit"

    def __init__(self, *, args: NodeResourcesFitArgs | None = None) -> None:
        self.args = args or NodeResourcesFitArgs()


__all__ = ["NodeResourcesBalancedAllocation", "NodeResourcesFit", "NodeResourcesFitArgs"]
