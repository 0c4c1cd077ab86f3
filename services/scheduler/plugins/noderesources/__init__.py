"""NodeResourcesFit: cpu, memory and pod count must fit; least-allocated nodes score best."""

from skiff.scheduler.plugins.noderesources.filtering import NodeResourcesFitFilter
from skiff.scheduler.plugins.noderesources.scoring import NodeResourcesFitScore


class NodeResourcesFit(NodeResourcesFitFilter, NodeResourcesFitScore):
    name = "NodeResourcesFit"


__all__ = ["NodeResourcesFit"]
