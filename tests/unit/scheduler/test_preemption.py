"""SPEC PP4–PP5: victim selection, candidate ordering, PDBs, Never policy, nominations."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.scheduler.algorithm import Algorithm
from skiff.scheduler.framework import CycleState, FitError
from skiff.scheduler.podinfo import PodInfo
from skiff.scheduler.preemption import (
    Candidate,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)
from tests.unit.scheduler.helpers import Env, affinity_pod, make_env

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"


def _victim(name: str, priority: int, start: str = T0) -> PodInfo:
    return PodInfo.from_pod(make_pod(name).priority(priority).start_time(start).obj())


def _c(name: str, *victims: PodInfo, pdb: int = 0) -> Candidate:
    return Candidate(name, list(victims), pdb)


@pytest.mark.parametrize(("candidates", "chosen"), [
    pytest.param([_c("a", _victim("v", 1), pdb=1), _c("b", _victim("v", 100))], "b",
                 id="1-fewest-pdb-violations"),
    pytest.param([_c("a", _victim("v", 50)), _c("b", _victim("v", 10), _victim("w", 10))],
                 "b", id="2-lowest-highest-victim-priority"),
    pytest.param([_c("a", _victim("v", 10), _victim("w", 9)),
                  _c("b", _victim("v", 10), _victim("w", 5))], "b",
                 id="3-smallest-priority-sum"),
    pytest.param([_c("a", _victim("v", 10), _victim("w", -5), _victim("x", -5)),
                  _c("b", _victim("v", 10), _victim("w", 0))], "b",
                 id="3-sum-counts-negative-priorities-as-positive"),
    pytest.param([_c("a", _victim("v", 10), _victim("w", 0), _victim("x", 0)),
                  _c("b", _victim("v", 10), _victim("w", 0), _victim("x", 0),
                     _victim("y", 0))], "a", id="4-fewest-victims"),
    pytest.param([_c("a", _victim("v", 10, T0)), _c("b", _victim("v", 10, T1))], "b",
                 id="5-latest-start-of-highest-priority-victims"),
    pytest.param([_c("a", _victim("v", 10)), _c("b", _victim("v", 10))], "a",
                 id="6-then-the-first"),
    pytest.param([_c("a", _victim("v", 10)), _c("b")], "b", id="no-victims-wins-at-once"),
])
def test_pp4_candidate_ordering(candidates: list[Candidate], chosen: str) -> None:
    assert pick_one_node_for_preemption(candidates, now=2e9) == chosen


def _pdb(selector: dict[str, str], allowed: int, disrupted: tuple[str, ...] = (),
         namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": namespace},
            "spec": {"selector": {"matchLabels": selector}},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {n: T0 for n in disrupted}}}


def test_pp4_pdb_violations_count_down_the_budget() -> None:
    pods = [PodInfo.from_pod(make_pod(f"p{i}").label("app", "db").obj()) for i in range(3)]
    other = PodInfo.from_pod(make_pod("other").label("app", "web").obj())
    violating, ok = filter_pods_with_pdb_violation([*pods, other], [_pdb({"app": "db"}, 1)])
    assert [p.name for p in violating] == ["p1", "p2"]
    assert [p.name for p in ok] == ["p0", "other"]
    _, ok = filter_pods_with_pdb_violation(pods, [_pdb({"app": "db"}, 0, ("p0",))])
    assert [p.name for p in ok] == ["p0"]  # already disrupted: not counted again
    _, ok = filter_pods_with_pdb_violation(pods, [_pdb({"app": "db"}, 0, namespace="x")])
    assert len(ok) == 3


def _full_cluster(*, pdbs: list[dict[str, Any]] | None = None) -> Env:
    """n1 holds two low pods (prio 1, 2), n2 two mid pods (prio 5); 2 cpu each, full."""
    nodes = [make_node(n).capacity({"cpu": "2"}).obj() for n in ("n1", "n2")]
    pods = [make_pod("low1").uid("l1").node("n1").priority(1).req({"cpu": "1"})
            .label("app", "db").obj(),
            make_pod("low2").uid("l2").node("n1").priority(2).req({"cpu": "1"})
            .label("app", "db").obj(),
            make_pod("mid1").uid("m1").node("n2").priority(5).req({"cpu": "1"}).obj(),
            make_pod("mid2").uid("m2").node("n2").priority(5).req({"cpu": "1"}).obj()]
    env = make_env(nodes, pods)
    env.listers.pdbs.extend(pdbs or [])
    return env


async def _schedule_and_preempt(env: Env, pod: dict[str, Any]) -> tuple[Any, Any, str]:
    info = PodInfo.from_pod(pod)
    state = CycleState()
    with pytest.raises(FitError) as failure:
        Algorithm(cache=env.cache).schedule_pod(env.fwk, state, info)
    result, status = await env.fwk.run_post_filter(state, info,
                                                   failure.value.diagnosis.node_to_status)
    return result, status, str(failure.value)


async def test_pp4_minimal_victims_lowest_priority_node() -> None:
    env = _full_cluster()
    result, status, _ = await _schedule_and_preempt(
        env, make_pod("high").uid("h").priority(10).req({"cpu": "1"}).obj())
    assert status.ok and result.nominated_node_name == "n1"
    # only one pod must go: the less important one (priority 1) is the victim
    assert env.actions.preempted == [("low1", "high", "n1")]


async def test_pp4_victims_are_preempted_in_parallel() -> None:
    """Like Kubernetes' prepareCandidate: every victim's deletion is under way before the
    first one finishes (one after the other, a preemption held the scheduling loop for
    several API round trips per victim)."""
    env = _full_cluster()
    in_flight: list[str] = []
    all_started = asyncio.Event()

    async def slow_preempt(victim: PodInfo, *, preemptor: PodInfo, node_name: str) -> None:
        in_flight.append(victim.name)
        if len(in_flight) == 2:
            all_started.set()
        await all_started.wait()  # a sequential loop never starts the second victim

    env.actions.preempt_victim = slow_preempt  # type: ignore[method-assign]
    result, status, _ = await asyncio.wait_for(_schedule_and_preempt(
        env, make_pod("high").uid("h").priority(10).req({"cpu": "2"}).obj()), 30)
    assert status.ok and result.nominated_node_name == "n1"
    assert sorted(in_flight) == ["low1", "low2"]


async def test_pp4_pdb_respected_when_another_candidate_exists() -> None:
    env = _full_cluster(pdbs=[_pdb({"app": "db"}, 0)])
    result, status, _ = await _schedule_and_preempt(
        env, make_pod("high").uid("h").priority(10).req({"cpu": "1"}).obj())
    assert result.nominated_node_name == "n2"
    assert [v for v, _, _ in env.actions.preempted] in (["mid1"], ["mid2"])


async def test_pp4_pdb_is_best_effort_only() -> None:
    env = _full_cluster(pdbs=[_pdb({"app": "db"}, 0)])
    result, _, _ = await _schedule_and_preempt(
        env, make_pod("high").uid("h").priority(3).req({"cpu": "2"}).obj())
    assert result.nominated_node_name == "n1"  # n2's pods are not lower priority
    assert sorted(v for v, _, _ in env.actions.preempted) == ["low1", "low2"]


async def test_pp4_only_lower_priority_pods_are_victims() -> None:
    env = _full_cluster()
    result, status, message = await _schedule_and_preempt(
        env, make_pod("equal").uid("e").priority(1).req({"cpu": "1"}).obj())
    assert result.nominated_node_name == "" and not env.actions.preempted
    assert status.message == ("preemption: 0/2 nodes are available: 2 No preemption victims "
                              "found for incoming pod.")
    assert message == "0/2 nodes are available: 2 Insufficient cpu."


async def test_pp4_unresolvable_nodes_are_not_helped_by_preemption() -> None:
    env = _full_cluster()
    pod = make_pod("high").uid("h").priority(10).node_selector({"disk": "ssd"}).obj()
    _, status, _ = await _schedule_and_preempt(env, pod)
    assert status.message == ("preemption: 0/2 nodes are available: 2 Preemption is not "
                              "helpful for scheduling.")


async def test_pp5_never_policy_does_not_preempt() -> None:
    env = _full_cluster()
    pod = (make_pod("never").uid("n").priority(10).preemption_policy("Never")
           .req({"cpu": "1"}).obj())
    result, status, _ = await _schedule_and_preempt(env, pod)
    assert result is None and not env.actions.preempted
    assert status.message == "preemption: not eligible due to preemptionPolicy=Never."


def _preempted_victim() -> PodInfo:
    """low1 on n1, deleted by an earlier preemption (DisruptionTarget by the scheduler)."""
    return PodInfo.from_pod(
        make_pod("low1").uid("l1").node("n1").priority(1).req({"cpu": "1"}).terminating()
        .condition("DisruptionTarget", reason="PreemptionByScheduler").obj())


async def test_pp5_no_second_preemption_while_victims_terminate() -> None:
    env = _full_cluster()
    env.cache.update_pod(_preempted_victim())
    pod = make_pod("high").uid("h").priority(10).req({"cpu": "1"}).nominated_node_name("n1")
    result, status, _ = await _schedule_and_preempt(env, pod.obj())
    assert result is None and not env.actions.preempted
    assert status.message == ("preemption: not eligible due to a terminating pod on the "
                              "nominated node.")


async def test_pp5_pods_terminating_for_another_reason_do_not_block_preemption() -> None:
    """PodEligibleToPreemptOthers (1.32) waits only for pods terminating because of
    preemption; a user's delete of a lower-priority pod does not hold the preemptor."""
    env = _full_cluster()
    env.cache.update_pod(PodInfo.from_pod(
        make_pod("low1").uid("l1").node("n1").priority(1).req({"cpu": "1"}).terminating()
        .obj()))
    pod = make_pod("high").uid("h").priority(10).req({"cpu": "1"}).nominated_node_name("n1")
    result, status, _ = await _schedule_and_preempt(env, pod.obj())
    assert status.ok and result.nominated_node_name == "n1"
    assert env.actions.preempted  # a second round ran


async def test_pp5_preempts_again_when_the_nominated_node_became_unresolvable() -> None:
    """The nominated node no longer suits the pod at all (UnschedulableAndUnresolvable):
    the preemptor preempts elsewhere even though a victim still terminates there."""
    env = _full_cluster()
    env.cache.update_pod(_preempted_victim())
    pod = (make_pod("high").uid("h").priority(10).req({"cpu": "1"})
           .node_selector({"kubernetes.io/hostname": "n2"}).nominated_node_name("n1"))
    result, status, _ = await _schedule_and_preempt(env, pod.obj())
    assert status.ok and result.nominated_node_name == "n2"
    assert [node for _, _, node in env.actions.preempted] == ["n2"]


async def test_pp5_stale_nomination_is_cleared_when_no_candidate_is_left() -> None:
    """Evaluator.Preempt returns an empty nomination when preemption cannot help: the
    pod's nominatedNodeName is cleared (not kept, holding the node's resources)."""
    env = _full_cluster()
    pod = (make_pod("equal").uid("e").priority(1).req({"cpu": "1"})
           .nominated_node_name("n1").obj())
    result, status, _ = await _schedule_and_preempt(env, pod)
    assert result is not None and result.nominated_node_name == ""
    assert status.message == ("preemption: 0/2 nodes are available: 2 No preemption victims "
                              "found for incoming pod.")


async def test_pp5_higher_priority_preemptor_clears_lower_nomination() -> None:
    env = _full_cluster()
    waiting = PodInfo.from_pod(make_pod("waiting").uid("w").priority(3).obj())
    env.nominator.add_nominated(waiting, "n1")
    result, _, _ = await _schedule_and_preempt(
        env, make_pod("top").uid("t").priority(100).req({"cpu": "2"}).obj())
    assert result.nominated_node_name == "n1"
    assert env.actions.cleared == ["waiting"]
    assert env.nominator.nominated_pods_for_node("n1") == []


async def test_pp5_disable_preemption_in_config() -> None:
    env = make_env([make_node("n1").capacity({"cpu": "1"}).obj()],
                   [make_pod("low").node("n1").priority(0).req({"cpu": "1"}).obj()],
                   config={"disablePreemption": True})
    assert env.fwk.post_filter_plugins == []


async def test_pp4_preemption_removes_a_lower_priority_pod_that_anti_affinity_repels() -> None:
    """InterPodAffinity's anti-affinity is Unschedulable (not Unresolvable), so
    preemption's dry run removes the repelled lower-priority pod (RemovePod) and finds
    the node fits without it."""
    env = make_env([make_node("n1").obj()],
                   [make_pod("low").uid("l").node("n1").priority(1).label("app", "db").obj()])
    pod = (affinity_pod("high").uid("h").priority(10)
           .pod_anti_affinity("kubernetes.io/hostname", {"matchLabels": {"app": "db"}}).obj())
    result, status, message = await _schedule_and_preempt(env, pod)
    assert message == "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    assert status.ok and result.nominated_node_name == "n1"
    assert env.actions.preempted == [("low", "high", "n1")]
