"""SPEC TS1–TS2: PodTopologySpread PreFilter state and Filter, table-driven with the
Kubernetes docs' own examples."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, make_node, make_pod
from skiff.scheduler.algorithm import Algorithm
from skiff.scheduler.framework import CycleState, FitError
from skiff.scheduler.plugins.podtopologyspread.filtering import (
    PRE_FILTER_STATE_KEY,
    PreFilterState,
)
from skiff.scheduler.podinfo import PodInfo
from tests.unit.scheduler.helpers import filter_results, make_env

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
FOO_BAR = {"matchLabels": {"foo": "bar"}}


def _zone_node(name: str, zone: str, *, key: str = "node") -> dict[str, Any]:
    return make_node(name).label("zone", zone).label(key, name).obj()


SEED_NODES = [_zone_node("node-a", "zone1"), _zone_node("node-b", "zone1"),
              _zone_node("node-x", "zone2"), _zone_node("node-y", "zone2")]
SEED_PODS = ([make_pod(f"p-a{i}").node("node-a").label("foo", "").obj() for i in (1, 2)]
             + [make_pod("p-b1").node("node-b").label("foo", "").obj()]
             + [make_pod(f"p-y{i}").node("node-y").label("foo", "").obj()
                for i in (1, 2, 3, 4)])


def _pre_filter(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                pod: dict[str, Any]) -> PreFilterState:
    env = make_env(nodes, pods)
    state = CycleState()
    assert env.fwk.run_pre_filter(state, PodInfo.from_pod(pod)).ok
    s: PreFilterState = state.read(PRE_FILTER_STATE_KEY)
    return s


@pytest.mark.parametrize(("pod", "nodes", "pods", "paths", "counts"), [
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE, FOO)
        .spread(1, "node", DO_NOT_SCHEDULE, FOO).obj(),
        SEED_NODES, SEED_PODS,
        {"zone": [("zone1", 3), ("zone2", 4)], "node": [("node-x", 0), ("node-b", 1)]},
        {("zone", "zone1"): 3, ("zone", "zone2"): 4, ("node", "node-a"): 2,
         ("node", "node-b"): 1, ("node", "node-x"): 0, ("node", "node-y"): 4},
        id="seed-normal-case-with-two-spreadConstraints"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE, FOO).obj(),
        SEED_NODES,
        SEED_PODS + [make_pod("other-ns").namespace("ns2").node("node-x").label("foo", "")
                     .obj(),
                     make_pod("leaving").node("node-x").label("foo", "").terminating().obj()],
        {"zone": [("zone1", 3), ("zone2", 4)]},
        {("zone", "zone1"): 3, ("zone", "zone2"): 4},
        id="ts1-other-namespace-and-terminating-pods-not-counted"),
    pytest.param(
        make_pod("p").label("foo", "").node_selector({"zone": "zone2"})
        .spread(1, "zone", DO_NOT_SCHEDULE, FOO).obj(),
        SEED_NODES, SEED_PODS,
        {"zone": [("zone2", 4), ("", 2**31 - 1)]},
        {("zone", "zone2"): 4},
        id="ts1-only-nodes-passing-nodeSelector-counted"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE, FOO)
        .spread(1, "node", DO_NOT_SCHEDULE, FOO).obj(),
        [*SEED_NODES[:3], make_node("node-y").label("zone", "zone2").obj()], SEED_PODS,
        {"zone": [("zone1", 3), ("zone2", 0)][::-1], "node": [("node-x", 0), ("node-b", 1)]},
        {("zone", "zone1"): 3, ("zone", "zone2"): 0, ("node", "node-a"): 2,
         ("node", "node-b"): 1, ("node", "node-x"): 0},
        id="ts1-nodes-missing-a-constraint-key-not-counted"),
])
def test_ts1_pre_filter_state(pod: dict[str, Any], nodes: list[dict[str, Any]],
                              pods: list[dict[str, Any]], paths: dict[str, Any],
                              counts: dict[tuple[str, str], int]) -> None:
    s = _pre_filter(nodes, pods, pod)
    assert {k: v.as_list() for k, v in s.tp_key_to_critical_paths.items()} == paths
    assert s.tp_pair_to_match_num == counts


# The Kubernetes docs' 4-node cluster: zoneA = node1, node2; zoneB = node3,
# node4; one foo=bar pod on each of node1, node2, node3.
FOUR_NODES = [make_node(n).label("zone", z).label("node", n).obj()
              for n, z in (("node1", "zoneA"), ("node2", "zoneA"), ("node3", "zoneB"),
                           ("node4", "zoneB"))]
FOUR_PODS = [make_pod(f"p{i}").label("foo", "bar").node(f"node{i}").obj() for i in (1, 2, 3)]
# The conflict example: zoneA = node1 (2 pods), node2 (1 pod); zoneB = node3 (2 pods).
THREE_NODES = [make_node(n).label("zone", z).label("node", n).obj()
               for n, z in (("node1", "zoneA"), ("node2", "zoneA"), ("node3", "zoneB"))]
THREE_PODS = [make_pod(f"p{i}").label("foo", "bar").node(n).obj()
              for i, n in enumerate(("node1", "node1", "node2", "node3", "node3"))]
NOT_MATCH = "node(s) didn't match pod topology spread constraints"


def _mypod(*keys: str, max_skew: int = 1, when: str = DO_NOT_SCHEDULE) -> dict[str, Any]:
    builder = make_pod("mypod").label("foo", "bar")
    for key in keys:
        builder.spread(max_skew, key, when, FOO_BAR)
    return builder.obj()


@pytest.mark.parametrize(("pod", "nodes", "pods", "fits"), [
    pytest.param(_mypod("zone"), FOUR_NODES, FOUR_PODS, {"node3", "node4"},
                 id="seed-single-constraint-zone-only-zoneB"),
    pytest.param(_mypod("zone", max_skew=2), FOUR_NODES, FOUR_PODS,
                 {"node1", "node2", "node3", "node4"}, id="seed-maxSkew-2-allows-zoneA"),
    pytest.param(_mypod("node"), FOUR_NODES, FOUR_PODS, {"node4"},
                 id="seed-single-constraint-node-only-node4"),
    pytest.param(_mypod("zone", when=SCHEDULE_ANYWAY), FOUR_NODES, FOUR_PODS,
                 {"node1", "node2", "node3", "node4"}, id="seed-ScheduleAnyway-never-filters"),
    pytest.param(_mypod("zone", "node"), FOUR_NODES, FOUR_PODS, {"node4"},
                 id="seed-two-constraints-only-node4"),
    pytest.param(_mypod("zone", "node"), THREE_NODES, THREE_PODS, set(),
                 id="seed-conflicting-constraints-fit-nowhere"),
    pytest.param(make_pod("mypod").spread(1, "zone", DO_NOT_SCHEDULE, FOO_BAR).obj(),
                 FOUR_NODES, FOUR_PODS + [make_pod("p4").label("foo", "bar").node("node1")
                                          .obj()], {"node3", "node4"},
                 id="ts1-pod-not-matching-its-own-selector-adds-no-self-match"),
])
def test_ts1_ts2_filter(pod: dict[str, Any], nodes: list[dict[str, Any]],
                        pods: list[dict[str, Any]], fits: set[str]) -> None:
    results = filter_results(make_env(nodes, pods), pod)
    assert {n for n, reason in results.items() if not reason} == fits
    assert all(reason == NOT_MATCH for n, reason in results.items() if n not in fits)


def test_ts1_node_without_the_topology_key_is_unresolvable() -> None:
    nodes = [*FOUR_NODES, make_node("bare").obj()]
    results = filter_results(make_env(nodes, FOUR_PODS), _mypod("zone"))
    assert results["bare"] == NOT_MATCH + " (missing required label)"


def test_ts1_self_match_counts_when_the_pod_matches_its_selector() -> None:
    # zoneA 2, zoneB 1: a matching pod makes zoneA 3 (skew 2); a non-matching one does not.
    pod = make_pod("mypod").label("foo", "bar").spread(2, "zone", DO_NOT_SCHEDULE, FOO_BAR)
    results = filter_results(make_env(FOUR_NODES, FOUR_PODS), pod.obj())
    assert results["node1"] == ""
    tight = _mypod("zone", max_skew=1)
    assert filter_results(make_env(FOUR_NODES, FOUR_PODS), tight)["node1"] == NOT_MATCH


def test_ts1_min_domains_makes_the_global_minimum_zero() -> None:
    # Only two zones exist but minDomains is 3: the minimum counts as 0.
    pod = (make_pod("mypod").label("foo", "bar")
           .spread(1, "zone", DO_NOT_SCHEDULE, FOO_BAR, min_domains=3).obj())
    pods = FOUR_PODS + [make_pod("p4").label("foo", "bar").node("node4").obj()]
    results = filter_results(make_env(FOUR_NODES, pods), pod)
    assert {n for n, r in results.items() if not r} == set()


def test_ts2_conflicting_constraints_leave_the_pod_pending_with_kubernetes_message() -> None:
    env = make_env(THREE_NODES, THREE_PODS)
    algorithm = Algorithm(cache=env.cache)
    with pytest.raises(FitError) as failure:
        algorithm.schedule_pod(env.fwk, CycleState(), PodInfo.from_pod(_mypod("zone", "node")))
    assert str(failure.value) == f"0/3 nodes are available: 3 {NOT_MATCH}."


def test_ts1_preemption_extensions_keep_counts_right() -> None:
    env = make_env(SEED_NODES, SEED_PODS)
    pod = PodInfo.from_pod(make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE,
                                                                 FOO).obj())
    state = CycleState()
    env.fwk.run_pre_filter(state, pod)
    node_y = env.cache.get("node-y")
    assert node_y is not None
    victim = next(p for p in node_y.pods if p.name == "p-y1")
    env.fwk.run_pre_filter_remove_pod(state, pod, victim, node_y)
    s: PreFilterState = state.read(PRE_FILTER_STATE_KEY)
    assert s.tp_pair_to_match_num[("zone", "zone2")] == 3
    assert s.tp_key_to_critical_paths["zone"].as_list() == [("zone1", 3), ("zone2", 3)]
    env.fwk.run_pre_filter_add_pod(state, pod, victim, node_y)
    assert s.tp_pair_to_match_num[("zone", "zone2")] == 4


@pytest.mark.parametrize("pod", [
    pytest.param(make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE, {}).obj(),
                 id="domain-index-fast-path"),
    pytest.param(make_pod("p").label("foo", "").node_selector({"zone": "zone1"})
                 .spread(1, "zone", DO_NOT_SCHEDULE, {}).obj(), id="node-scan-path"),
])
def test_ts1_empty_label_selector_counts_no_pods(pod: dict[str, Any]) -> None:
    """Kubernetes' countPodsMatchSelector: `labelSelector: {}` counts no existing pod
    (zone1 has 3 pods, zone2 4, all would match an everything-selector)."""
    s = _pre_filter(SEED_NODES, SEED_PODS, pod)
    assert set(s.tp_pair_to_match_num.values()) == {0}
    results = filter_results(make_env(SEED_NODES, SEED_PODS),
                             make_pod("p").label("foo", "")
                             .spread(1, "zone", DO_NOT_SCHEDULE, {}).obj())
    assert all(reason == "" for reason in results.values())
