"""Preemption (SPEC PP4–PP5; Kubernetes' `framework/preemption` Evaluator).

When no node fits, find nodes where evicting only lower-priority pods lets the pod fit:
on a copy of each node remove every lower-priority pod, check the pod fits, then add the
removed pods back, most important first and PDB-violating ones before the rest, keeping
each that still leaves room. Pick the candidate with the fewest PDB violations, then the
lowest highest-victim priority, the smallest priority sum, the fewest victims, the latest
start of the highest-priority victims, then the first. The dry runs read the cache without
awaiting; only then are victims deleted (gracefully, full grace period) through
`PreemptionActions`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from skiff.api import LabelSelector
from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework import (
    Code,
    CycleState,
    Diagnosis,
    Framework,
    PostFilterResult,
    Status,
    error,
    fit_error_message,
    unresolvable,
    unschedulable,
)
from skiff.scheduler.podinfo import PREEMPT_NEVER, PodInfo

MAX_INT32 = 2**31 - 1
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class PreemptionActions(Protocol):
    """The API side of preemption, implemented by the scheduler service."""

    async def preempt_victim(self, victim: PodInfo, *, preemptor: PodInfo,
                             node_name: str) -> None: ...

    async def clear_nominated_node_name(self, pod: PodInfo) -> None: ...


class PDBLister(Protocol):
    def list_pdbs(self) -> list[Mapping[str, Any]]: ...


@dataclass(frozen=True)
class PreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    @classmethod
    def from_dict(cls, args: Mapping[str, Any] | None) -> PreemptionArgs:
        args = args or {}
        return cls(int(args.get("minCandidateNodesPercentage", 10)),
                   int(args.get("minCandidateNodesAbsolute", 100)))


@dataclass
class Candidate:
    name: str
    victims: list[PodInfo]
    num_pdb_violations: int


@dataclass
class _PDB:
    namespace: str
    selector: LabelSelector
    disrupted: frozenset[str]
    allowed: int


def terminating_by_preemption(pod: PodInfo) -> bool:
    """Kubernetes' `podTerminatingByPreemption`: deleting, with a True DisruptionTarget
    condition whose reason is PreemptionByScheduler."""
    if not pod.terminating:
        return False
    for condition in (pod.pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return bool(condition.get("status") == "True"
                        and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER)
    return False


def more_important_pod(a: PodInfo, b: PodInfo, now: float) -> bool:
    """Higher priority first; equal priority: the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return (a.start_time or now) < (b.start_time or now)


def _sort_key(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    return lambda p: (-p.priority, p.start_time if p.start_time is not None else now)


def _parse_pdbs(pdbs: Sequence[Mapping[str, Any]]) -> list[_PDB]:
    out = []
    for pdb in pdbs:
        meta = pdb.get("metadata") or {}
        status = pdb.get("status") or {}
        try:
            selector = LabelSelector.from_dict((pdb.get("spec") or {}).get("selector"))
        except Exception:
            continue
        out.append(_PDB(str(meta.get("namespace") or "default"), selector,
                        frozenset(status.get("disruptedPods") or {}),
                        int(status.get("disruptionsAllowed") or 0)))
    return out


def filter_pods_with_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[Mapping[str, Any]]
                                   ) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each keeping the input order: a pod violates when
    evicting it (after the ones before it) takes a matching budget below zero."""
    parsed = _parse_pdbs(pdbs)
    allowed = [p.allowed for p in parsed]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(parsed):
                if pdb.namespace != pod.namespace:
                    continue
                if pdb.selector.empty or not pdb.selector.matches(pod.labels):
                    continue
                if pod.name in pdb.disrupted:
                    continue  # already being disrupted: counted by the budget
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def pick_one_node_for_preemption(candidates: Sequence[Candidate], *, now: float) -> str:
    """PP4's order: fewest PDB violations, lowest highest-victim priority, smallest sum of
    priorities, fewest victims, latest start of the highest-priority victims, first."""
    if not candidates:
        return ""
    for c in candidates:
        if not c.victims:
            return c.name

    def highest(c: Candidate) -> int:
        return c.victims[0].priority

    def earliest_start_of_highest(c: Candidate) -> float:
        top = highest(c)
        return min((v.start_time if v.start_time is not None else now)
                   for v in c.victims if v.priority == top)

    criteria: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -highest(c),
        lambda c: -sum(v.priority + MAX_INT32 + 1 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_start_of_highest,
    ]
    remaining = list(candidates)
    for score in criteria:
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
        if len(remaining) == 1:
            break
    return remaining[0].name


@dataclass
class Evaluator:
    fwk: Framework
    cache: Cache
    pdbs: PDBLister
    actions: PreemptionActions
    nominator: Any  # the queue's nominator: nominated_pods_for_node, delete_nominated
    args: PreemptionArgs = field(default_factory=PreemptionArgs)
    rng: random.Random = field(default_factory=random.Random)
    now: Callable[[], float] = field(default=lambda: 0.0)

    def pod_eligible_to_preempt_others(self, pod: PodInfo,
                                       nominated_node_status: Status | None = None
                                       ) -> tuple[bool, str]:
        """Kubernetes 1.32 `PodEligibleToPreemptOthers`: never for preemptionPolicy Never;
        again when the nominated node became UnschedulableAndUnresolvable; not while a
        lower-priority pod on the nominated node is still terminating *because of
        preemption* (DisruptionTarget, reason PreemptionByScheduler) — its resources are
        about to come free. Other terminating pods (a user's delete) do not block."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_NEVER
        if pod.nominated_node_name:
            if (nominated_node_status is not None
                    and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                return True, ""
            node = self.cache.get(pod.nominated_node_name)
            if node is not None and any(p.priority < pod.priority
                                        and terminating_by_preemption(p)
                                        for p in node.pods):
                return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    async def preempt(self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
                      ) -> tuple[PostFilterResult | None, Status]:
        """Kubernetes' `Evaluator.Preempt`. A None result leaves the pod's nomination as
        it is; a result with an empty `nominated_node_name` clears a stale one (no
        candidate any more), so its node's resources are no longer held for it."""
        nominated_status = statuses.get(pod.nominated_node_name) if pod.nominated_node_name \
            else None
        ok, message = self.pod_eligible_to_preempt_others(pod, nominated_status)
        if not ok:
            return None, unschedulable(message)
        candidates, node_statuses = self.find_candidates(state, pod, statuses)
        if not candidates:
            diagnosis = Diagnosis(node_to_status=node_statuses)
            return (PostFilterResult(nominated_node_name=""),
                    unschedulable(fit_error_message(len(node_statuses), diagnosis)))
        best = self.select_candidate(candidates)
        await self.prepare_candidate(best, pod)
        return PostFilterResult(nominated_node_name=best.name), Status()

    def candidate_count(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def find_candidates(self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
                        ) -> tuple[list[Candidate], dict[str, Status]]:
        all_nodes = self.cache.node_infos()
        node_statuses: dict[str, Status] = {}
        potential: list[NodeInfo] = []
        for node in all_nodes:
            status = statuses.get(node.name)
            if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                node_statuses[node.name] = unresolvable(NOT_HELPFUL)
            else:
                potential.append(node)
        if not potential:
            return [], node_statuses
        pdbs = self.pdbs.list_pdbs()
        offset = self.rng.randrange(len(potential))
        wanted = self.candidate_count(len(potential))
        violating: list[Candidate] = []
        non_violating: list[Candidate] = []
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            victims, num_violations, status = self.select_victims_on_node(
                state.clone(), pod, node.clone(), pdbs)
            if status.ok and victims:
                candidate = Candidate(node.name, victims, num_violations)
                (violating if num_violations else non_violating).append(candidate)
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
            elif status.ok:
                node_statuses[node.name] = error("expected at least one victim pod on node "
                                                 f"{node.name}")
            else:
                node_statuses[node.name] = status
        return non_violating + violating, node_statuses

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                               pdbs: Sequence[Mapping[str, Any]]
                               ) -> tuple[list[PodInfo], int, Status]:
        """On a copy of the node: the minimal set of lower-priority pods to evict."""
        now = self.now()
        potential = [p for p in node.pods if p.priority < pod.priority]
        if not potential:
            return [], 0, unresolvable(NO_VICTIMS)
        for p in potential:
            node.remove_pod(p)
            self.fwk.run_pre_filter_remove_pod(state, pod, p, node)
        status = self.fwk.run_filter_with_nominated_pods(state, pod, node)
        if not status.ok:
            return [], 0, status
        potential.sort(key=_sort_key(now))
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0

        def reprieve(p: PodInfo) -> bool:
            node.add_pod(p)
            self.fwk.run_pre_filter_add_pod(state, pod, p, node)
            if self.fwk.run_filter_with_nominated_pods(state, pod, node).ok:
                return True
            node.remove_pod(p)
            self.fwk.run_pre_filter_remove_pod(state, pod, p, node)
            victims.append(p)
            return False

        for p in violating:
            if not reprieve(p):
                num_violating += 1
        for p in non_violating:
            reprieve(p)
        victims.sort(key=_sort_key(now))
        return victims, num_violating, Status()

    def select_candidate(self, candidates: Sequence[Candidate]) -> Candidate:
        if len(candidates) == 1:
            return candidates[0]
        name = pick_one_node_for_preemption(candidates, now=self.now())
        return next(c for c in candidates if c.name == name)

    async def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> None:
        """Delete the victims gracefully and take the node from lower-priority nominees.
        The victims are preempted in parallel, as Kubernetes' prepareCandidate does (each is
        a few API calls; one after the other they held the scheduling loop that long)."""
        results = await asyncio.gather(
            *(self.actions.preempt_victim(victim, preemptor=pod, node_name=candidate.name)
              for victim in candidate.victims), return_exceptions=True)
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        for nominated in list(self.nominator.nominated_pods_for_node(candidate.name)):
            if nominated.priority < pod.priority and nominated.uid != pod.uid:
                self.nominator.delete_nominated(nominated)
                await self.actions.clear_nominated_node_name(nominated)
