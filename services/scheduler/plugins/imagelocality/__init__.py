"""ImageLocality Score (Kubernetes' imagelocality plugin): nodes that already have the
pod's images score higher, by image size scaled by how many nodes have the image (so one
node holding a popular image does not attract everything), between 23 MiB and 1000 MiB per
container. Images come from the node's `status.images`; a node that reports none (Skiff's
kubelet does not report images today) scores 0 everywhere, so the plugin changes nothing
until kubelets publish images."""

from __future__ import annotations

from collections.abc import Sequence

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import MAX_NODE_SCORE, SKIP, SUCCESS, CycleState, Status
from skiff.scheduler.podinfo import PodInfo, normalized_image_name

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    sum_scores = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name = "ImageLocality"

    def __init__(self, *, cache: Cache) -> None:
        self.cache = cache

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        """No node reports images: every node would score 0, so skip the per-node work."""
        return SUCCESS if self.cache.image_nodes else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        facts = node.facts
        if facts is None or not facts.images:
            return 0
        spec = pod.pod.get("spec") or {}
        containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
        total_nodes = len(self.cache)
        total = 0
        for container in containers:
            name = normalized_image_name(str(container.get("image") or ""))
            size = facts.images.get(name)
            if size is not None and total_nodes:
                total += int(size * (self.cache.image_nodes.get(name, 0) / total_nodes))
        return calculate_priority(total, len(containers))


__all__ = ["ImageLocality"]
