"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score."""

from skiff.scheduler.plugins.nodeaffinity.filtering import NodeAffinityFilter
from skiff.scheduler.plugins.nodeaffinity.scoring import NodeAffinityScore


class NodeAffinity(NodeAffinityFilter, NodeAffinityScore):
    name = "NodeAffinity"


__all__ = ["NodeAffinity"]
