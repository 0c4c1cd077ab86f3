"""The scheduler's incremental view of the cluster (Kubernetes' `internal/cache`).

Informer events update it one object at a time: nodes, the pods on each node, what they
request, and per node a count of pods by (namespace, label set) so topology spread counts a
domain by matching each distinct label set once instead of every pod; for the topology
keys topology spread has asked about it also keeps those counts per domain
(`topology_domains`), so PreFilter counts a zone without visiting its nodes. A pod the scheduler
has chosen a node for is *assumed* here before its binding reaches the apiserver, so the
next cycle already sees its resources; the informer's event later confirms it, and a failed
binding forgets it. A scheduling cycle runs without awaiting, so it sees one consistent
state; preemption's dry runs work on `NodeInfo.clone()`s and never touch the cache.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from skiff.api.resources import Resource
from skiff.scheduler.podinfo import NodeFacts, PodInfo

log = logging.getLogger(__name__)

LabelSetKey = tuple[str, frozenset[tuple[str, str]]]
_NO_LABELS: Mapping[str, str] = {}


@dataclass(slots=True, eq=False)
class NodeInfo:
    """A node and the pods on it (Kubernetes' `framework.NodeInfo`)."""

    facts: NodeFacts | None
    pods: list[PodInfo] = field(default_factory=list)
    requested: Resource = field(default_factory=Resource)
    non_zero_requested: Resource = field(default_factory=Resource)
    # (namespace, labels) → count of non-terminating pods, for topology spread counting.
    label_sets: dict[LabelSetKey, int] = field(default_factory=dict)
    generation: int = 0
    # Kubernetes' PodsWithAffinity / PodsWithRequiredAntiAffinity, for InterPodAffinity.
    pods_with_affinity: list[PodInfo] = field(default_factory=list)
    pods_with_required_anti_affinity: list[PodInfo] = field(default_factory=list)

    # The node's name ("" once the node is gone): a field, not a property of `facts`,
    # because the filters and scores read it for every node of every cycle (a property
    # was 5 % of the scheduler's samples). `set_facts` keeps it in step.
    name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.set_facts(self.facts)

    def set_facts(self, facts: NodeFacts | None) -> None:
        self.facts = facts
        self.name = facts.name if facts is not None else ""

    @property
    def labels(self) -> Mapping[str, str]:
        return self.facts.labels if self.facts is not None else _NO_LABELS

    def add_pod(self, pod: PodInfo) -> None:
        self.pods.append(pod)
        self.requested.add(pod.requests)
        self.non_zero_requested.add(pod.non_zero_requests)
        if not pod.terminating:
            key = (pod.namespace, pod.label_set)
            self.label_sets[key] = self.label_sets.get(key, 0) + 1
        if pod.has_pod_affinity:
            self.pods_with_affinity.append(pod)
            if pod.required_anti_affinity_terms:
                self.pods_with_required_anti_affinity.append(pod)
        self.generation += 1

    def remove_pod(self, pod: PodInfo) -> bool:
        for i, existing in enumerate(self.pods):
            if existing.key == pod.key:
                del self.pods[i]
                self.requested.sub(existing.requests)
                self.non_zero_requested.sub(existing.non_zero_requests)
                if not existing.terminating:
                    key = (existing.namespace, existing.label_set)
                    left = self.label_sets.get(key, 0) - 1
                    if left > 0:
                        self.label_sets[key] = left
                    else:
                        self.label_sets.pop(key, None)
                if existing.has_pod_affinity:
                    self.pods_with_affinity = [p for p in self.pods_with_affinity
                                               if p.key != existing.key]
                    if existing.required_anti_affinity_terms:
                        self.pods_with_required_anti_affinity = [
                            p for p in self.pods_with_required_anti_affinity
                            if p.key != existing.key]
                self.generation += 1
                return True
        return False

    def clone(self) -> NodeInfo:
        return NodeInfo(self.facts, list(self.pods), self.requested.copy(),
                        self.non_zero_requested.copy(), dict(self.label_sets),
                        self.generation, list(self.pods_with_affinity),
                        list(self.pods_with_required_anti_affinity))


@dataclass(slots=True, eq=False)
class TopologyDomain:
    """One value of a topology key: how many nodes carry it and, over those nodes, the
    non-terminating pods by (namespace, label set)."""

    nodes: int = 0
    label_sets: dict[LabelSetKey, int] = field(default_factory=dict)


@dataclass(slots=True)
class _PodState:
    pod: PodInfo
    assumed: bool
    binding_finished: bool = False


class Cache:
    """Nodes and assigned pods, kept current by informer events."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._node_list: list[NodeInfo] | None = None
        self._pods: dict[str, _PodState] = {}
        self.node_generation = 0  # bumps when a node is added, removed or relabelled
        # topology key → domain value → TopologyDomain, for the keys topology spread has
        # asked about; kept current by every node and pod event from then on.
        self._domains: dict[str, dict[str, TopologyDomain]] = {}
        # How many placed pods have any pod (anti-)affinity / a required anti-affinity
        # term, so InterPodAffinity skips its pass over the nodes when there are none.
        self.pods_with_affinity = 0
        self.pods_with_required_anti_affinity = 0
        # image name → how many nodes report it in `status.images` (ImageLocality)
        self.image_nodes: dict[str, int] = {}

    # -- reads -------------------------------------------------------------------------

    def node_infos(self) -> list[NodeInfo]:
        """Nodes that exist (not placeholders for pods whose node is not seen yet)."""
        if self._node_list is None:
            self._node_list = [n for n in self._nodes.values() if n.facts is not None]
        return self._node_list

    def get(self, node_name: str) -> NodeInfo | None:
        info = self._nodes.get(node_name)
        return info if info is not None and info.facts is not None else None

    def is_assumed(self, key: str) -> bool:
        state = self._pods.get(key)
        return state is not None and state.assumed

    def has_pod(self, key: str) -> bool:
        return key in self._pods

    def pod(self, key: str) -> PodInfo | None:
        state = self._pods.get(key)
        return state.pod if state is not None else None

    def pods(self) -> Iterator[PodInfo]:
        return (s.pod for s in self._pods.values())

    def __len__(self) -> int:
        return len(self.node_infos())

    def topology_domains(self, key: str) -> Mapping[str, TopologyDomain]:
        """The domains of topology key `key` over existing nodes, with their pods counted
        by label set, so topology spread counts a domain without visiting its nodes.
        The first call for a key builds its index (one pass over the nodes)."""
        domains = self._domains.get(key)
        if domains is None:
            domains = self._domains[key] = {}
            for info in self.node_infos():
                self._index_node(info, 1, keys=(key,))
        return domains

    def nodes_with_label(self, key: str) -> int:
        """How many existing nodes carry the label `key`."""
        return sum(d.nodes for d in self.topology_domains(key).values())

    # -- the topology index ------------------------------------------------------------

    def _index_node(self, info: NodeInfo, sign: int, *,
                    keys: Iterable[str] | None = None) -> None:
        assert info.facts is not None
        labels = info.facts.labels
        for key in self._domains if keys is None else keys:
            value = labels.get(key)
            if value is None:
                continue
            domains = self._domains[key]
            domain = domains.get(value)
            if domain is None:
                domain = domains[value] = TopologyDomain()
            domain.nodes += sign
            counts = domain.label_sets
            for label_set, n in info.label_sets.items():
                left = counts.get(label_set, 0) + sign * n
                if left:
                    counts[label_set] = left
                else:
                    counts.pop(label_set, None)
            if domain.nodes == 0:
                del domains[value]

    def _index_pod(self, info: NodeInfo, pod: PodInfo, sign: int) -> None:
        if info.facts is None or pod.terminating:
            return
        labels = info.facts.labels
        label_set = (pod.namespace, pod.label_set)
        for key, domains in self._domains.items():
            value = labels.get(key)
            if value is None:
                continue
            counts = domains[value].label_sets
            left = counts.get(label_set, 0) + sign
            if left:
                counts[label_set] = left
            else:
                counts.pop(label_set, None)

    # -- nodes -------------------------------------------------------------------------

    def _count_images(self, facts: NodeFacts | None, sign: int) -> None:
        if facts is None:
            return
        for name in facts.images:
            left = self.image_nodes.get(name, 0) + sign
            if left > 0:
                self.image_nodes[name] = left
            else:
                self.image_nodes.pop(name, None)

    def add_node(self, facts: NodeFacts) -> None:
        info = self._nodes.get(facts.name)
        self._count_images(info.facts if info is not None else None, -1)
        self._count_images(facts, 1)
        if info is None:
            info = self._nodes[facts.name] = NodeInfo(facts)
            if self._domains:
                self._index_node(info, 1)
        else:
            relabelled = info.facts is None or info.facts.labels != facts.labels
            if relabelled and self._domains and info.facts is not None:
                self._index_node(info, -1)
            info.set_facts(facts)
            info.generation += 1
            if relabelled and self._domains:
                self._index_node(info, 1)
        self._node_list = None
        self.node_generation += 1

    update_node = add_node

    def remove_node(self, name: str) -> None:
        info = self._nodes.get(name)
        if info is None:
            return
        if self._domains and info.facts is not None:
            self._index_node(info, -1)
        self._count_images(info.facts, -1)
        if info.pods:
            info.set_facts(None)  # keep the pods until their deletes arrive
        else:
            del self._nodes[name]
        self._node_list = None
        self.node_generation += 1

    # -- pods --------------------------------------------------------------------------

    def _place(self, pod: PodInfo) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            info = self._nodes[pod.node_name] = NodeInfo(None)
        info.add_pod(pod)
        if self._domains:
            self._index_pod(info, pod, 1)
        self._count_affinity(pod, 1)

    def _count_affinity(self, pod: PodInfo, sign: int) -> None:
        if pod.has_pod_affinity:
            self.pods_with_affinity += sign
            if pod.required_anti_affinity_terms:
                self.pods_with_required_anti_affinity += sign

    def _unplace(self, pod: PodInfo) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            return
        if info.remove_pod(pod):
            if self._domains:
                self._index_pod(info, pod, -1)
            self._count_affinity(pod, -1)
        if info.facts is None and not info.pods:
            del self._nodes[pod.node_name]

    def assume_pod(self, pod: PodInfo) -> None:
        """The scheduler chose `pod.node_name`; count it there until bound or forgotten."""
        if pod.key in self._pods:
            raise ValueError(f"pod {pod.key} is already in the scheduler cache")
        self._place(pod)
        self._pods[pod.key] = _PodState(pod, assumed=True)

    def finish_binding(self, key: str) -> None:
        state = self._pods.get(key)
        if state is not None and state.assumed:
            state.binding_finished = True

    def forget_pod(self, key: str) -> None:
        """Binding failed: the assumed pod is not on that node after all."""
        state = self._pods.get(key)
        if state is not None and state.assumed:
            self._unplace(state.pod)
            del self._pods[key]

    def add_pod(self, pod: PodInfo) -> None:
        """An assigned pod from the informer (confirms an assumed one)."""
        state = self._pods.get(pod.key)
        if state is not None:
            self._unplace(state.pod)
        self._place(pod)
        self._pods[pod.key] = _PodState(pod, assumed=False)

    update_pod = add_pod

    def remove_pod(self, key: str) -> PodInfo | None:
        state = self._pods.pop(key, None)
        if state is None:
            return None
        self._unplace(state.pod)
        return state.pod
