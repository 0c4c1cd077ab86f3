"""A profile's runtime (Kubernetes' `frameworkImpl`): the enabled plugins of each
extension point, in order, with score weights, and the rules for running them.

Filters stop at the first rejection (so a node's reason is the first plugin's, as in
Kubernetes); pods nominated to a node with priority ≥ the pod's are added to a copy of the
node before filtering, so resources held for a preemptor count as used for lower-priority
pods (`RunFilterPluginsWithNominatedPods`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    ALL_EVENTS,
    MAX_NODE_SCORE,
    SUCCESS,
    BatchScorePlugin,
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
    QueueingHintPlugin,
    RawScoreNormalizer,
    ScoreNormalizer,
    ScorePlugin,
    Status,
    error,
)
from skiff.scheduler.podinfo import PodInfo

FilterCall = Callable[[CycleState, PodInfo, NodeInfo], Status]


class PodNominator(Protocol):
    @property
    def nodes(self) -> Mapping[str, object]: ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...


_NONE: Mapping[str, object] = {}


class _NoNominations:
    @property
    def nodes(self) -> Mapping[str, object]:
        return _NONE

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
    pod_hints: dict[str, QueueingHintPlugin] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None
    nominator: PodNominator = field(default_factory=_NoNominations)
    _filters: list[tuple[str, FilterCall]] = field(default_factory=list, init=False,
                                                   repr=False)
    _filters_of: list[FilterPlugin] | None = field(default=None, init=False, repr=False)
    _extension_plugins: list[PreFilterExtensions] = field(default_factory=list, init=False,
                                                          repr=False)
    _extensions_of: list[PreFilterPlugin] | None = field(default=None, init=False,
                                                         repr=False)
    _extensions_len: int = field(default=0, init=False, repr=False)
    _scores: list[tuple[ScorePlugin, int, int, bool]] = field(
        default_factory=list, init=False, repr=False)
    _scores_of: list[tuple[ScorePlugin, int]] | None = field(default=None, init=False,
                                                             repr=False)

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
        """The PreFilter plugins with AddPod/RemovePod, found once: an `isinstance`
        against a runtime Protocol is slow, and preemption asks per victim."""
        if (self._extensions_of is not self.pre_filter_plugins
                or self._extensions_len != len(self.pre_filter_plugins)):
            self._extension_plugins = [p for p in self.pre_filter_plugins
                                       if isinstance(p, PreFilterExtensions)]
            self._extensions_of = self.pre_filter_plugins
            self._extensions_len = len(self.pre_filter_plugins)
        return self._extension_plugins

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

    def _filter_calls(self) -> list[tuple[str, FilterCall]]:
        """(name, bound filter) per plugin, rebuilt when `filter_plugins` is replaced."""
        if (self._filters_of is not self.filter_plugins
                or len(self._filters) != len(self.filter_plugins)):
            self._filters = [(p.name, p.filter) for p in self.filter_plugins]
            self._filters_of = self.filter_plugins
        return self._filters

    def run_filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        skip = state.skip_filter
        for name, filter_ in self._filter_calls():
            if skip and name in skip:
                continue
            status = filter_(state, pod, node)
            if not status.ok:
                return status.with_plugin(name)
        return SUCCESS

    def filter_runner(self, state: CycleState, pod: PodInfo) -> Callable[[NodeInfo], Status]:
        """`run_filter_with_nominated_pods` bound to one cycle, for the loop over nodes:
        the skipped plugins are dropped once, not checked on every node."""
        skip = state.skip_filter
        calls = [(name, f) for name, f in self._filter_calls() if name not in skip]
        nominated_nodes = self.nominator.nodes
        with_nominated = self.run_filter_with_nominated_pods

        def run(node: NodeInfo) -> Status:
            if nominated_nodes and node.name in nominated_nodes:
                return with_nominated(state, pod, node)
            for name, filter_ in calls:
                status = filter_(state, pod, node)
                if not status.ok:
                    return status.with_plugin(name)
            return SUCCESS
        return run

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
        """The first success wins; a rejecting plugin's result (e.g. preemption clearing
        a stale nomination) is kept, as Kubernetes' RunPostFilterPlugins does."""
        last: Status = Status(Code.UNSCHEDULABLE)
        kept: PostFilterResult | None = None
        for plugin in self.post_filter_plugins:
            result, status = await plugin.post_filter(state, pod, statuses)
            if status.ok:
                return result, status
            if status.code == Code.ERROR:
                return None, status.with_plugin(plugin.name)
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return result, status.with_plugin(plugin.name)
            if result is not None:
                kept = result
            last = status.with_plugin(plugin.name)
        return kept, last

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

    def _score_calls(self) -> list[tuple[ScorePlugin, int, int, bool]]:
        """(plugin, weight, how it normalizes: 0 not, 1 NodeScores, 2 plain lists, scores in
        batches) per score plugin, found once: an `isinstance` against a runtime Protocol is
        slow and this runs every cycle."""
        if self._scores_of is not self.score_plugins or len(self._scores) != len(
                self.score_plugins):
            self._scores = [(p, w, 2 if isinstance(p, RawScoreNormalizer)
                             else 1 if isinstance(p, ScoreNormalizer) else 0,
                             isinstance(p, BatchScorePlugin))
                            for p, w in self.score_plugins]
            self._scores_of = self.score_plugins
        return self._scores

    def run_score(self, state: CycleState, pod: PodInfo,
                  nodes: Sequence[NodeInfo]) -> list[NodeScore]:
        """Weighted sum over score plugins of each plugin's normalized score."""
        names = [n.name for n in nodes]
        return [NodeScore(name, t) for name, t in zip(
            names, self.run_score_totals(state, pod, nodes, names), strict=True)]

    def run_score_totals(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                         names: Sequence[str]) -> list[int]:
        """`run_score`'s totals alone, `totals[i]` for `nodes[i]` (named `names[i]`)."""
        totals = [0] * len(nodes)
        skip = state.skip_score
        for plugin, weight, normalizes, batch in self._score_calls():
            if plugin.name in skip:
                continue
            if batch:
                raw = plugin.score_nodes(state, pod, nodes)  # type: ignore[attr-defined]
            else:
                score = plugin.score
                raw = [score(state, pod, n) for n in nodes]
            if normalizes == 2:
                raw = plugin.normalize_raw(state, pod, names, raw)  # type: ignore[attr-defined]
            elif normalizes == 1:
                scores = [NodeScore(name, s) for name, s in zip(names, raw, strict=True)]
                plugin.normalize_score(state, pod, scores)  # type: ignore[attr-defined]
                raw = [s.score for s in scores]
            if raw and (min(raw) < 0 or max(raw) > MAX_NODE_SCORE):
                name, bad = next((n, s) for n, s in zip(names, raw, strict=True)
                                 if not 0 <= s <= MAX_NODE_SCORE)
                raise ValueError(error(f"plugin {plugin.name} returned an invalid score "
                                       f"{bad} for node {name}").message)
            if weight == 1:
                totals = [t + s for t, s in zip(totals, raw, strict=True)]
            else:
                totals = [t + s * weight for t, s in zip(totals, raw, strict=True)]
        return totals

    @property
    def has_filter_plugins(self) -> bool:
        return bool(self.filter_plugins)

    @property
    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)

    def worth_retrying(self, plugins: set[str], event: ClusterEvent, pod: PodInfo,
                       old: PodInfo | None, new: PodInfo | None) -> bool:
        """Whether `event` (about the assigned pod `old` → `new`, when it is a pod event)
        may make `pod`, rejected by `plugins`, schedulable: some rejecting plugin
        registered the event and, if it has a queueing hint, the hint says so."""
        if not plugins:
            return True
        for name in plugins:
            if event not in self.events.get(name, ALL_EVENTS):
                continue
            hint = self.pod_hints.get(name)
            if hint is None or (old is None and new is None):
                return True
            if hint.is_schedulable_after_pod_change(pod, old, new):
                return True
        return False

    def events_for(self, plugins: set[str]) -> frozenset[ClusterEvent]:
        """The events after which a pod rejected by `plugins` is worth retrying."""
        out: set[ClusterEvent] = set()
        for name in plugins:
            out |= self.events.get(name, frozenset(ClusterEvent))
        return frozenset(out)
