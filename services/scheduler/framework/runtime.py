"""A profile's runtime (Kubernetes' `frameworkImpl`): the enabled plugins of each
extension point, in order, with score weights, and the rules for running them.

Filters stop at the first rejection (so a node's reason is the first plugin's, as in
Kubernetes); pods nominated to a node with priority ≥ the pod's are added to a copy of the
node before filtering, so resources held for a preemptor count as used for lower-priority
pods (`RunFilterPluginsWithNominatedPods`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    NodeScore,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
    error,
)
from skiff.scheduler.podinfo import PodInfo


class PodNominator(Protocol):
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...


class _NoNominations:
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []


@dataclass(eq=False)
class Framework:
    """One profile: `scheduler_name` plus its plugins per extension point."""

    scheduler_name: str = "default-scheduler"
    pre_filter_plugins: list[PreFilterPlugin] = field(default_factory=list)
    filter_plugins: list[FilterPlugin] = field(default_factory=list)
    post_filter_plugins: list[PostFilterPlugin] = field(default_factory=list)
    pre_score_plugins: list[PreScorePlugin] = field(default_factory=list)
    score_plugins: list[tuple[ScorePlugin, int]] = field(default_factory=list)
    events: dict[str, frozenset[ClusterEvent]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None
    nominator: PodNominator = field(default_factory=_NoNominations)

    # -- PreFilter -------------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if status.code == Code.SKIP:
                state.skip_filter.add(plugin.name)
            elif not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def _extensions(self) -> list[PreFilterExtensions]:
        return [p for p in self.pre_filter_plugins if isinstance(p, PreFilterExtensions)]

    def run_pre_filter_add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo,
                               node: NodeInfo) -> None:
        for plugin in self._extensions():
            if plugin.name not in state.skip_filter:
                plugin.add_pod(state, pod, to_add, node)

    def run_pre_filter_remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo,
                                  node: NodeInfo) -> None:
        for plugin in self._extensions():
            if plugin.name not in state.skip_filter:
                plugin.remove_pod(state, pod, to_remove, node)

    # -- Filter ----------------------------------------------------------------------------

    def run_filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        skip = state.skip_filter
        for plugin in self.filter_plugins:
            if skip and plugin.name in skip:
                continue
            status = plugin.filter(state, pod, node)
            if not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def run_filter_with_nominated_pods(self, state: CycleState, pod: PodInfo,
                                       node: NodeInfo) -> Status:
        """Filter twice when higher-or-equal priority pods are nominated to the node: with
        them (their resources are promised) and without (they may never come)."""
        nominated = [p for p in self.nominator.nominated_pods_for_node(node.name)
                     if p.priority >= pod.priority and p.uid != pod.uid]
        if nominated:
            with_nominated = node.clone()
            state_with = state.clone()
            for p in nominated:
                with_nominated.add_pod(p)
                self.run_pre_filter_add_pod(state_with, pod, p, with_nominated)
            status = self.run_filter(state_with, pod, with_nominated)
            if not status.ok:
                return status
        return self.run_filter(state, pod, node)

    # -- PostFilter ------------------------------------------------------------------------

    async def run_post_filter(self, state: CycleState, pod: PodInfo,
                              statuses: dict[str, Status]
                              ) -> tuple[PostFilterResult | None, Status]:
        last: Status = Status(Code.UNSCHEDULABLE)
        for plugin in self.post_filter_plugins:
            result, status = await plugin.post_filter(state, pod, statuses)
            if status.ok:
                return result, status
            if status.code == Code.ERROR:
                return None, status.with_plugin(plugin.name)
            last = status.with_plugin(plugin.name)
        return None, last

    # -- PreScore / Score --------------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: PodInfo,
                      nodes: Sequence[NodeInfo]) -> Status:
        for plugin in self.pre_score_plugins:
            status = plugin.pre_score(state, pod, nodes)
            if status.code == Code.SKIP:
                state.skip_score.add(plugin.name)
            elif not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def run_score(self, state: CycleState, pod: PodInfo,
                  nodes: Sequence[NodeInfo]) -> list[NodeScore]:
        """Weighted sum over score plugins of each plugin's normalized score."""
        totals = [NodeScore(n.name, 0) for n in nodes]
        for plugin, weight in self.score_plugins:
            if plugin.name in state.skip_score:
                continue
            scores = [NodeScore(n.name, plugin.score(state, pod, n)) for n in nodes]
            if isinstance(plugin, ScoreNormalizer):
                plugin.normalize_score(state, pod, scores)
            for total, s in zip(totals, scores, strict=True):
                if not 0 <= s.score <= 100:
                    raise ValueError(error(f"plugin {plugin.name} returned an invalid score "
                                           f"{s.score} for node {s.name}").message)
                total.score += s.score * weight
        return totals

    @property
    def has_filter_plugins(self) -> bool:
        return bool(self.filter_plugins)

    @property
    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)

    def events_for(self, plugins: set[str]) -> frozenset[ClusterEvent]:
        """The events after which a pod rejected by `plugins` is worth retrying."""
        out: set[ClusterEvent] = set()
        for name in plugins:
            out |= self.events.get(name, frozenset(ClusterEvent))
        return frozenset(out)
