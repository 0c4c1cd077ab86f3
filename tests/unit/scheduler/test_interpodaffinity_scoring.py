"""InterPodAffinity Score, replaying the cases of Kubernetes' interpodaffinity
scoring_test.go black-box: preferred affinity (+weight) and anti-affinity (−weight) of the
incoming pod, the existing pods' preferred terms and required affinity
(hardPodAffinityWeight) towards it, and normalization onto [0, 100]."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from tests.unit.scheduler.helpers import affinity_pod, make_env, plugin_scores

S1 = {"security": "S1"}
S2 = {"security": "S2"}
IN_S1 = {"matchExpressions": [{"key": "security", "operator": "In", "values": ["S1"]}]}
IN_S2 = {"matchExpressions": [{"key": "security", "operator": "In", "values": ["S2"]}]}

CHINA = make_node("node1").label("region", "China").obj()
INDIA = make_node("node2").label("region", "India").obj()
AZ1 = make_node("node3").label("az", "az1").obj()
CHINA3 = make_node("node3").label("region", "China").obj()


def _on(node: str, labels: dict[str, str], name: str = "") -> Obj:
    return make_pod(name or f"{node}-{'-'.join(labels.values())}").labels(labels).node(node).obj()


@pytest.mark.parametrize(("pod", "nodes", "pods", "scores"), [
    pytest.param(make_pod("p").labels(S1).obj(), [CHINA, INDIA, AZ1], [],
                 {"node1": 0, "node2": 0, "node3": 0}, id="no-affinity-all-score-0"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(5, "region", IN_S1).obj(),
                 [CHINA, INDIA, AZ1], [_on("node1", S1)],
                 {"node1": 100, "node2": 0, "node3": 0},
                 id="affinity-node-with-matching-pod-in-topology-scores-high"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(5, "region", IN_S1).obj(),
                 [CHINA, INDIA, CHINA3], [_on("node1", S1)],
                 {"node1": 100, "node2": 0, "node3": 100},
                 id="affinity-same-topology-value-same-score"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(8, "region", IN_S1)
                 .preferred_pod_affinity(2, "region", IN_S2).obj(),
                 [CHINA, INDIA, AZ1], [_on("node1", S1), _on("node2", S2)],
                 {"node1": 100, "node2": 25, "node3": 0},
                 id="affinity-weights-add-up-and-normalize"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_anti_affinity(5, "region", IN_S1)
                 .obj(), [CHINA, INDIA, AZ1], [_on("node1", S1)],
                 {"node1": 0, "node2": 100, "node3": 100},
                 id="anti-affinity-node-with-matching-pod-scores-low"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(5, "region", IN_S1)
                 .preferred_pod_anti_affinity(5, "region", IN_S2).obj(),
                 [CHINA, INDIA, AZ1], [_on("node1", S1), _on("node2", S2)],
                 {"node1": 100, "node2": 0, "node3": 50},
                 id="affinity-and-anti-affinity-together"),
    pytest.param(make_pod("p").labels(S1).obj(), [CHINA, INDIA, AZ1],
                 [affinity_pod("e").labels(S2).node("node2")
                  .preferred_pod_affinity(5, "region", IN_S1).obj()],
                 {"node1": 0, "node2": 100, "node3": 0},
                 id="symmetry-existing-pods-preferred-affinity"),
    pytest.param(make_pod("p").labels(S1).obj(), [CHINA, INDIA, AZ1],
                 [affinity_pod("e").labels(S2).node("node2")
                  .preferred_pod_anti_affinity(5, "region", IN_S1).obj()],
                 {"node1": 100, "node2": 0, "node3": 100},
                 id="symmetry-existing-pods-preferred-anti-affinity"),
    pytest.param(make_pod("p").labels(S1).obj(), [CHINA, INDIA, AZ1],
                 [affinity_pod("e").labels(S2).node("node1").pod_affinity("region", IN_S1)
                  .obj()],
                 {"node1": 100, "node2": 0, "node3": 0},
                 id="symmetry-existing-pods-required-affinity-hardPodAffinityWeight"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(5, "region", IN_S1).obj(),
                 [CHINA, INDIA, AZ1], [_on("node1", S1, name="a"),
                                       _on("node1", S1, name="b"), _on("node2", S1)],
                 {"node1": 100, "node2": 50, "node3": 0},
                 id="each-matching-pod-counts"),
    pytest.param(affinity_pod().labels(S1).preferred_pod_affinity(5, "region", IN_S1).obj(),
                 [CHINA, INDIA, AZ1],
                 [make_pod("elsewhere").namespace("other").labels(S1).node("node1").obj()],
                 {"node1": 0, "node2": 0, "node3": 0},
                 id="terms-default-to-the-pods-own-namespace"),
])
def test_inter_pod_affinity_score(pod: Obj, nodes: list[Obj], pods: list[Obj],
                                  scores: dict[str, int]) -> None:
    assert plugin_scores(make_env(nodes, pods), "InterPodAffinity", pod) == scores


def test_inter_pod_affinity_hard_pod_affinity_weight_0_ignores_required_terms() -> None:
    config = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0}}]}]}
    pods = [affinity_pod("e").labels(S2).node("node1").pod_affinity("region", IN_S1).obj()]
    env = make_env([CHINA, INDIA, AZ1], pods, config=config)
    assert plugin_scores(env, "InterPodAffinity", make_pod("p").labels(S1).obj()) == {
        "node1": 0, "node2": 0, "node3": 0}


def test_inter_pod_affinity_ignore_preferred_terms_of_existing_pods() -> None:
    config = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}]}]}
    pods = [affinity_pod("e").labels(S2).node("node2")
            .preferred_pod_affinity(5, "region", IN_S1).obj()]
    env = make_env([CHINA, INDIA, AZ1], pods, config=config)
    assert plugin_scores(env, "InterPodAffinity", make_pod("p").labels(S1).obj()) == {
        "node1": 0, "node2": 0, "node3": 0}
