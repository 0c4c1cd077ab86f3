"""Builders for scheduler unit tests: a cache from node and pod dicts, and frameworks
made of chosen plugins (the shared `make_pod`/`make_node` builders make the objects)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skiff.api import LabelSelector
from skiff.api.testing import PodBuilder
from skiff.api.types import Obj
from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.config import Profile, parse_config
from skiff.scheduler.framework import CycleState, Framework, NodeScore
from skiff.scheduler.framework.registry import Handle, build_framework
from skiff.scheduler.plugins import in_tree_registry
from skiff.scheduler.podinfo import NodeFacts, PodInfo
from skiff.scheduler.queue import Nominator


def build_cache(nodes: Sequence[Obj], pods: Sequence[Obj] = ()) -> Cache:
    cache = Cache()
    for node in nodes:
        cache.add_node(NodeFacts.from_node(node))
    for pod in pods:
        cache.add_pod(PodInfo.from_pod(pod))
    return cache


def node_of(cache: Cache, name: str) -> NodeInfo:
    info = cache.get(name)
    assert info is not None
    return info


@dataclass
class FakeActions:
    """Records what preemption asked the API to do."""

    preempted: list[tuple[str, str, str]] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)

    async def preempt_victim(self, victim: PodInfo, *, preemptor: PodInfo,
                             node_name: str) -> None:
        self.preempted.append((victim.name, preemptor.name, node_name))

    async def clear_nominated_node_name(self, pod: PodInfo) -> None:
        self.cleared.append(pod.name)


@dataclass
class Listers:
    owners: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    pdbs: list[Obj] = field(default_factory=list)
    claims: dict[tuple[str, str], Obj] = field(default_factory=dict)
    storage_classes: dict[str, Obj] = field(default_factory=dict)

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.claims.get((namespace, name))

    def get_storage_class(self, name: str) -> Mapping[str, Any] | None:
        return self.storage_classes.get(name)

    def get_owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.owners.get((kind, namespace, name))

    def list_pdbs(self) -> list[Mapping[str, Any]]:
        return list(self.pdbs)


@dataclass
class Env:
    cache: Cache
    fwk: Framework
    nominator: Nominator
    actions: FakeActions
    listers: Listers


def make_env(nodes: Sequence[Obj], pods: Sequence[Obj] = (), *,
             config: Mapping[str, Any] | None = None, listers: Listers | None = None,
             seed: int = 0, now: float = 1_795_000_000.0,
             namespaces: Mapping[str, dict[str, str]] | None = None) -> Env:
    cache = build_cache(nodes, pods)
    nominator = Nominator()
    actions = FakeActions()
    listers = listers or Listers()
    cfg = parse_config(config or {}) if config is not None else None
    profile = cfg.profiles[0] if cfg is not None else Profile()
    handle = Handle(cache=cache, nominator=nominator, owners=listers, pdbs=listers,
                    namespaces=FakeNamespaces(dict(namespaces or {})), claims=listers,
                    actions=actions, rng=random.Random(seed), now=lambda: now)
    fwk = build_framework(profile, registry=in_tree_registry(), handle=handle,
                          disable_preemption=cfg.disable_preemption if cfg else False)
    return Env(cache, fwk, nominator, actions, listers)


def plugin(fwk: Framework, name: str) -> Any:
    for group in (fwk.pre_filter_plugins, fwk.filter_plugins, fwk.post_filter_plugins,
                  fwk.pre_score_plugins, [p for p, _ in fwk.score_plugins]):
        for p in group:
            if p.name == name:
                return p
    raise KeyError(name)


def filter_results(env: Env, pod: Obj) -> dict[str, str]:
    """Node name → "" when it fits, else the first rejecting reason."""
    info = PodInfo.from_pod(pod)
    state = CycleState()
    status = env.fwk.run_pre_filter(state, info)
    assert status.ok, status
    out = {}
    for node in env.cache.node_infos():
        result = env.fwk.run_filter_with_nominated_pods(state, info, node)
        out[node.name] = "" if result.ok else result.message
    return out


def plugin_scores(env: Env, name: str, pod: Obj, node_names: Sequence[str] | None = None,
                  *, normalize: bool = True) -> dict[str, int]:
    """One score plugin's (normalized) scores over the given (filtered) nodes."""
    info = PodInfo.from_pod(pod)
    p = plugin(env.fwk, name)
    nodes = [n for n in env.cache.node_infos() if node_names is None or n.name in node_names]
    state = CycleState()
    env.fwk.run_pre_filter(state, info)
    if hasattr(p, "pre_score"):
        p.pre_score(state, info, nodes)
    if name in state.skip_score:
        return {n.name: 0 for n in nodes}
    scores = [NodeScore(n.name, p.score(state, info, n)) for n in nodes]
    if normalize and hasattr(p, "normalize_score"):
        p.normalize_score(state, info, scores)
    return {s.name: s.score for s in scores}


class AffinityPodBuilder(PodBuilder):
    """`make_pod` with pod (anti-)affinity terms, Kubernetes' st.MakePod() style:
    `affinity_pod("p").label("foo", "bar").pod_affinity("zone", {"matchLabels": ...})`."""

    def _term(self, topology_key: str, selector: Mapping[str, Any] | None,
              namespaces: Sequence[str] | None, namespace_selector: Mapping[str, Any] | None
              ) -> dict[str, Any]:
        term: dict[str, Any] = {"topologyKey": topology_key}
        if selector is not None:
            term["labelSelector"] = dict(selector)
        if namespaces is not None:
            term["namespaces"] = list(namespaces)
        if namespace_selector is not None:
            term["namespaceSelector"] = dict(namespace_selector)
        return term

    def _add(self, kind: str, mode: str, entry: dict[str, Any]) -> AffinityPodBuilder:
        affinity = self._spec.setdefault("affinity", {}).setdefault(kind, {})
        affinity.setdefault(mode, []).append(entry)
        return self

    def pod_affinity(self, topology_key: str, selector: Mapping[str, Any] | None, *,
                     namespaces: Sequence[str] | None = None,
                     namespace_selector: Mapping[str, Any] | None = None
                     ) -> AffinityPodBuilder:
        return self._add("podAffinity", REQUIRED, self._term(
            topology_key, selector, namespaces, namespace_selector))

    def pod_anti_affinity(self, topology_key: str, selector: Mapping[str, Any] | None, *,
                          namespaces: Sequence[str] | None = None,
                          namespace_selector: Mapping[str, Any] | None = None
                          ) -> AffinityPodBuilder:
        return self._add("podAntiAffinity", REQUIRED, self._term(
            topology_key, selector, namespaces, namespace_selector))

    def preferred_pod_affinity(self, weight: int, topology_key: str,
                               selector: Mapping[str, Any] | None, *,
                               namespaces: Sequence[str] | None = None
                               ) -> AffinityPodBuilder:
        return self._add("podAffinity", PREFERRED, {"weight": weight, "podAffinityTerm":
                         self._term(topology_key, selector, namespaces, None)})

    def preferred_pod_anti_affinity(self, weight: int, topology_key: str,
                                    selector: Mapping[str, Any] | None, *,
                                    namespaces: Sequence[str] | None = None
                                    ) -> AffinityPodBuilder:
        return self._add("podAntiAffinity", PREFERRED, {"weight": weight, "podAffinityTerm":
                         self._term(topology_key, selector, namespaces, None)})


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def affinity_pod(name: str = "p") -> AffinityPodBuilder:
    return AffinityPodBuilder(name)


@dataclass
class FakeNamespaces:
    """Namespace labels for namespaceSelector (the scheduler's namespace informer)."""

    labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.labels.get(name)

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset(n for n, labels in self.labels.items() if selector.matches(labels))
