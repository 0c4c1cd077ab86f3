"""One scheduling decision (Kubernetes' `schedulePod`): PreFilter, Filter over enough
nodes, PreScore/Score, then the best node (ties broken at random).

It runs without awaiting, so the cache it reads cannot change under it. Like Kubernetes it
filters only until it has `num_feasible_nodes_to_find` feasible nodes (the adaptive
percentage-of-nodes-to-score), starting where the previous cycle stopped so every node gets
its turn, and it tries a pod's nominated node first.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework import (
    CycleState,
    Diagnosis,
    FitError,
    Framework,
    Status,
)
from skiff.scheduler.podinfo import PodInfo

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class NoNodesAvailable(Exception):
    def __str__(self) -> str:
        return "no nodes available to schedule pods"


@dataclass(frozen=True)
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes are enough: all below 100 nodes; else the configured
    percentage, or 50 − nodes/125 (at least 5 %) when it is 0; never fewer than 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * percentage // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


class Algorithm:
    """Holds what carries over between cycles: where filtering starts, the tie-breaker."""

    def __init__(self, *, cache: Cache, percentage_of_nodes_to_score: int = 0,
                 rng: random.Random | None = None) -> None:
        self.cache = cache
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.rng = rng or random.Random()
        self.next_start_node_index = 0

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo) -> ScheduleResult:
        nodes = self.cache.node_infos()
        if not nodes:
            raise NoNodesAvailable()
        feasible, diagnosis = self.find_nodes_that_fit(fwk, state, pod, nodes)
        if not feasible:
            raise FitError(pod=pod, num_all_nodes=len(nodes), diagnosis=diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1)
        names = [n.name for n in feasible]
        totals = self.prioritize_nodes(fwk, state, pod, feasible, names)
        return ScheduleResult(self.select_host(names, totals), evaluated, len(feasible))

    def find_nodes_that_fit(self, fwk: Framework, state: CycleState, pod: PodInfo,
                            nodes: list[NodeInfo]) -> tuple[list[NodeInfo], Diagnosis]:
        diagnosis = Diagnosis()
        status = fwk.run_pre_filter(state, pod)
        if not status.ok:
            if not status.rejected:
                raise RuntimeError(f"running PreFilter plugin {status.plugin}: "
                                   f"{status.message}")
            for node in nodes:
                diagnosis.node_to_status[node.name] = status
            diagnosis.pre_filter_msg = status.message
            diagnosis.unschedulable_plugins.add(status.plugin)
            return [], diagnosis
        if pod.nominated_node_name:
            nominated = self.cache.get(pod.nominated_node_name)
            if nominated is not None and fwk.run_filter_with_nominated_pods(
                    state, pod, nominated).ok:
                return [nominated], diagnosis
        feasible = self.find_nodes_that_pass_filters(fwk, state, pod, nodes, diagnosis)
        return feasible, diagnosis

    def find_nodes_that_pass_filters(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                     nodes: list[NodeInfo],
                                     diagnosis: Diagnosis) -> list[NodeInfo]:
        total = len(nodes)
        percentage = (fwk.percentage_of_nodes_to_score
                      if fwk.percentage_of_nodes_to_score is not None
                      else self.percentage_of_nodes_to_score)
        wanted = num_feasible_nodes_to_find(percentage, total)
        start = self.next_start_node_index % total
        feasible: list[NodeInfo] = []
        statuses = diagnosis.node_to_status
        processed = 0
        if not fwk.has_filter_plugins:
            feasible = [nodes[(start + i) % total] for i in range(min(wanted, total))]
            self.next_start_node_index = (start + len(feasible)) % total
            return feasible
        run = fwk.filter_runner(state, pod)
        for node in itertools.chain(nodes[start:], nodes[:start]):
            processed += 1
            status: Status = run(node)
            if status.ok:
                feasible.append(node)
                if len(feasible) >= wanted:
                    break
            elif status.rejected:
                statuses[node.name] = status
                diagnosis.unschedulable_plugins.add(status.plugin)
            else:
                raise RuntimeError(f"running Filter plugin {status.plugin} on node "
                                   f"{node.name}: {status.message}")
        self.next_start_node_index = (start + processed) % total
        return feasible

    def prioritize_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo,
                         nodes: list[NodeInfo], names: list[str]) -> list[int]:
        """Each node's total score (`nodes[i]`, named `names[i]`)."""
        status = fwk.run_pre_score(state, pod, nodes)
        if not status.ok:
            raise RuntimeError(f"running PreScore plugin {status.plugin}: {status.message}")
        return fwk.run_score_totals(state, pod, nodes, names)

    def select_host(self, names: list[str], totals: list[int]) -> str:
        """The highest total; among equals, each is equally likely (one draw per cycle
        instead of Kubernetes' reservoir sampling's draw per tie: the same distribution)."""
        top = max(totals)
        best = [name for name, t in zip(names, totals, strict=True) if t == top]
        return best[0] if len(best) == 1 else best[self.rng.randrange(len(best))]
