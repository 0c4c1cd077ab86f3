"""The scheduling cycle: Kubernetes' failure message, percentage of nodes to score, and
nominated pods holding resources for lower-priority pods."""

from __future__ import annotations

import random

import pytest

from skiff.api.testing import NO_SCHEDULE, make_node, make_pod
from skiff.scheduler.algorithm import Algorithm, NoNodesAvailable, num_feasible_nodes_to_find
from skiff.scheduler.framework import CycleState, FitError
from skiff.scheduler.podinfo import PodInfo
from tests.unit.scheduler.helpers import make_env


def test_fit_error_message_is_kubernetes_histogram() -> None:
    nodes = [make_node("n1").taint("dedicated", NO_SCHEDULE, "db").obj(),
             make_node("n2").capacity({"cpu": "1"}).obj(),
             make_node("n3").capacity({"cpu": "1"}).obj()]
    env = make_env(nodes)
    pod = PodInfo.from_pod(make_pod().req({"cpu": "2"}).obj())
    with pytest.raises(FitError) as failure:
        Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(), pod)
    assert str(failure.value) == ("0/3 nodes are available: 1 node(s) had untolerated taint "
                                  "{dedicated: db}, 2 Insufficient cpu.")
    assert failure.value.diagnosis.unschedulable_plugins == {"TaintToleration",
                                                             "NodeResourcesFit"}


def test_no_nodes() -> None:
    env = make_env([])
    with pytest.raises(NoNodesAvailable, match="no nodes available to schedule pods"):
        Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(),
                                                PodInfo.from_pod(make_pod().obj()))


@pytest.mark.parametrize(("percentage", "nodes", "wanted"), [
    pytest.param(0, 50, 50, id="small-cluster-all"),
    pytest.param(0, 1000, 420, id="adaptive-42-percent"),
    pytest.param(0, 5000, 500, id="adaptive-10-percent"),
    pytest.param(0, 10000, 500, id="adaptive-floor-5-percent"),
    pytest.param(0, 150, 100, id="never-below-100"),
    pytest.param(30, 1000, 300, id="configured"),
])
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, wanted: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == wanted


def test_filtering_stops_at_enough_feasible_nodes_and_rotates() -> None:
    env = make_env([make_node(f"n{i:03}").obj() for i in range(200)])
    algorithm = Algorithm(cache=env.cache, percentage_of_nodes_to_score=10,
                          rng=random.Random(1))
    result = algorithm.schedule_pod(env.fwk, CycleState(), PodInfo.from_pod(make_pod().obj()))
    assert result.evaluated_nodes == 100 and result.feasible_nodes == 100
    assert algorithm.next_start_node_index == 100


def test_nominated_pods_hold_resources_for_lower_priority_pods_only() -> None:
    env = make_env([make_node("n1").capacity({"cpu": "2"}).obj()])
    holder = PodInfo.from_pod(make_pod("preemptor").uid("u1").priority(100)
                              .req({"cpu": "2"}).obj())
    env.nominator.add_nominated(holder, "n1")
    algorithm = Algorithm(cache=env.cache)
    low = PodInfo.from_pod(make_pod("low").priority(10).req({"cpu": "1"}).obj())
    with pytest.raises(FitError, match="1 Insufficient cpu"):
        algorithm.schedule_pod(env.fwk, CycleState(), low)
    high = PodInfo.from_pod(make_pod("high").priority(1000).req({"cpu": "1"}).obj())
    assert algorithm.schedule_pod(env.fwk, CycleState(), high).suggested_host == "n1"


def test_nominated_node_is_tried_first() -> None:
    env = make_env([make_node(f"n{i}").obj() for i in range(5)])
    pod = PodInfo.from_pod(make_pod().nominated_node_name("n3").obj())
    result = Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(), pod)
    assert (result.suggested_host, result.evaluated_nodes) == ("n3", 1)


def test_highest_score_wins() -> None:
    nodes = [make_node("busy").obj(), make_node("idle").obj()]
    pods = [make_pod("x").node("busy").req({"cpu": "3"}).obj()]
    env = make_env(nodes, pods)
    result = Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(),
                                                     PodInfo.from_pod(make_pod().obj()))
    assert result.suggested_host == "idle"
