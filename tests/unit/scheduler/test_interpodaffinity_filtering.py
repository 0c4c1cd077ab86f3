"""InterPodAffinity Filter, replaying the cases of Kubernetes' interpodaffinity
filtering_test.go black-box (TestRequiredAffinitySingleNode / MultipleNodes shapes):
required affinity, anti-affinity, existing pods' anti-affinity (symmetry), namespaces and
namespaceSelector, the first pod of a self-affine group, and preemption's AddPod/RemovePod."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from skiff.scheduler.framework import CycleState
from skiff.scheduler.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFFINITY,
)
from skiff.scheduler.plugins.interpodaffinity.filtering import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
)
from skiff.scheduler.plugins.interpodaffinity.filtering import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
)
from skiff.scheduler.podinfo import PodInfo
from tests.unit.scheduler.helpers import affinity_pod, filter_results, make_env, plugin


def _in(key: str, *values: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def _not_in(key: str, *values: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(values)}]}


def _exists(key: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
MACHINE1 = make_node("machine1").label("region", "r1").label("zone", "z11").obj()


def _existing(labels: dict[str, str], node: str = "machine1", name: str = "existing",
              namespace: str = "default") -> Obj:
    return make_pod(name).namespace(namespace).labels(labels).node(node).obj()


SINGLE_NODE_CASES = [
    pytest.param(make_pod("p").obj(), [], "",
                 id="no-required-pod-affinity-fits-an-empty-node"),
    pytest.param(affinity_pod().labels(S1).pod_affinity("region", _in(
        "service", "securityscan", "value2")).obj(), [_existing(SCAN)], "",
        id="affinity-In-matches-the-existing-pod"),
    pytest.param(affinity_pod().labels(S1).pod_affinity("region", _not_in(
        "service", "securityscan3", "value3")).obj(), [_existing(SCAN)], "",
        id="affinity-NotIn-matches-the-existing-pod"),
    pytest.param(affinity_pod().labels(S1).pod_affinity(
        "region", _in("service", "securityscan", "value2"), namespaces=["DiffNameSpace"])
        .obj(), [_existing(SCAN, namespace="ns")], AFFINITY,
        id="affinity-not-met-because-of-a-different-namespace"),
    pytest.param(affinity_pod().labels(SCAN).pod_affinity("region", _in(
        "service", "antivirusscan", "value2")).obj(), [_existing(SCAN)], AFFINITY,
        id="affinity-selector-does-not-match-the-existing-pod"),
    pytest.param(affinity_pod().labels(S1)
                 .pod_affinity("region", {"matchExpressions": [
                     {"key": "service", "operator": "Exists"},
                     {"key": "wrongkey", "operator": "DoesNotExist"}]})
                 .pod_affinity("region", {"matchExpressions": [
                     {"key": "service", "operator": "In", "values": ["securityscan"]},
                     {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]})
                 .obj(), [_existing(SCAN)], "", id="several-terms-all-met"),
    pytest.param(affinity_pod().labels(S1)
                 .pod_affinity("region", _exists("service"))
                 .pod_affinity("region", {"matchExpressions": [
                     {"key": "service", "operator": "In", "values": ["securityscan2"]},
                     {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]})
                 .obj(), [_existing(SCAN)], AFFINITY,
        id="requirements-are-ANDed-one-fails"),
    pytest.param(affinity_pod().labels(S1)
                 .pod_affinity("region", _in("service", "securityscan", "value2"))
                 .pod_anti_affinity("node", _in("service", "antivirusscan", "value2")).obj(),
                 [_existing(SCAN)], "", id="affinity-and-anti-affinity-met"),
    pytest.param(affinity_pod().labels(S1)
                 .pod_affinity("region", _in("service", "securityscan", "value2"))
                 .pod_anti_affinity("node", _in("service", "antivirusscan", "value2")).obj(),
                 [affinity_pod("existing").labels(SCAN).node("machine1").pod_anti_affinity(
                     "node", _in("service", "antivirusscan", "value2")).obj()], "",
                 id="affinity-anti-affinity-and-symmetry-met"),
    pytest.param(affinity_pod().labels(S1)
                 .pod_affinity("region", _in("service", "securityscan", "value2"))
                 .pod_anti_affinity("zone", _in("service", "securityscan", "value2")).obj(),
                 [_existing(SCAN)], ANTI, id="affinity-met-anti-affinity-not"),
    pytest.param(affinity_pod().labels(SCAN)
                 .pod_affinity("region", _in("service", "securityscan", "value2"))
                 .pod_anti_affinity("node", _in("service", "antivirusscan", "value2")).obj(),
                 [affinity_pod("existing").labels(SCAN).node("machine1").pod_anti_affinity(
                     "zone", _in("service", "securityscan", "value2")).obj()], EXISTING,
                 id="existing-pods-anti-affinity-symmetry-not-met"),
    pytest.param(affinity_pod().labels(SCAN).pod_affinity("region", _not_in(
        "service", "securityscan", "value2")).obj(), [_existing(SCAN, node="machine2")],
        AFFINITY, id="pod-not-matching-its-own-term-and-no-match-elsewhere"),
    pytest.param(make_pod("p").labels(SCAN).obj(),
                 [affinity_pod("existing").labels(SCAN).node("machine1").pod_anti_affinity(
                     "zone", _in("service", "securityscan", "value2")).obj()], EXISTING,
                 id="existing-anti-affinity-respected-for-a-pod-without-any"),
    pytest.param(make_pod("p").labels(SCAN).obj(),
                 [affinity_pod("existing").labels(SCAN).node("machine1").pod_anti_affinity(
                     "zone", _not_in("service", "securityscan", "value2")).obj()], "",
                 id="existing-anti-affinity-not-matching-the-pod"),
    pytest.param(affinity_pod().labels(SCAN).pod_anti_affinity("region", _exists("service"))
                 .pod_anti_affinity("region", _exists("security")).obj(),
                 [affinity_pod("existing").labels(S1).node("machine1").pod_anti_affinity(
                     "zone", _exists("security")).obj()], ANTI,
                 id="incoming-anti-affinity-checked-before-existing-pods"),
    pytest.param(make_pod("p").labels(SCAN).obj(),
                 [make_pod("existing").labels(SCAN).node("machine1").terminating().obj()],
                 "", id="pod-without-affinity-ignores-plain-pods"),
]


@pytest.mark.parametrize(("pod", "pods", "reason"), SINGLE_NODE_CASES)
def test_inter_pod_affinity_filter_single_node(pod: Obj, pods: list[Obj], reason: str) -> None:
    assert filter_results(make_env([MACHINE1], pods), pod) == {"machine1": reason}


def test_inter_pod_affinity_statuses_have_kubernetes_codes() -> None:
    """Affinity not met → UnschedulableAndUnresolvable (preemption cannot help);
    anti-affinity → Unschedulable (removing the matching pod can)."""
    env = make_env([MACHINE1], [_existing(SCAN)])
    fwk = env.fwk
    node = env.cache.get("machine1")
    assert node is not None
    for pod, code in ((affinity_pod().pod_affinity("region", _in("service", "x")).obj(), 3),
                      (affinity_pod().pod_anti_affinity("region", _exists("service")).obj(),
                       2)):
        info = PodInfo.from_pod(pod)
        state = CycleState()
        assert fwk.run_pre_filter(state, info).ok
        assert int(fwk.run_filter(state, info, node).code) == code


R1Z1 = make_node("machine1").label("region", "r1").label("zone", "z1").obj()
R1Z2 = make_node("machine2").label("region", "r1").label("zone", "z2").obj()
R2Z3 = make_node("machine3").label("region", "r2").label("zone", "z3").obj()
BARE = make_node("machine4").obj()
FOO_BAR = {"matchLabels": {"foo": "bar"}}


@pytest.mark.parametrize(("pod", "pods", "fits"), [
    pytest.param(affinity_pod().pod_affinity("region", FOO_BAR).obj(),
                 [_existing({"foo": "bar"})], {"machine1", "machine2"},
                 id="every-node-in-the-matching-pods-region"),
    pytest.param(affinity_pod().labels({"foo": "bar"}).pod_affinity("region", FOO_BAR).obj(),
                 [], {"machine1", "machine2", "machine3"},
                 id="first-pod-of-a-self-affine-group-goes-where-the-key-is"),
    pytest.param(affinity_pod().labels({"foo": "bar"}).pod_affinity("region", FOO_BAR).obj(),
                 [_existing({"foo": "bar"}, node="machine3")], {"machine3"},
                 id="once-a-group-exists-the-pod-joins-it"),
    pytest.param(affinity_pod().pod_anti_affinity("region", FOO_BAR).obj(),
                 [_existing({"foo": "bar"})], {"machine3", "machine4"},
                 id="anti-affinity-excludes-the-whole-region-not-nodes-without-the-key"),
    pytest.param(affinity_pod().labels({"foo": "bar"}).pod_anti_affinity(
        "kubernetes.io/hostname", FOO_BAR).obj(),
        [_existing({"foo": "bar"}), _existing({"foo": "bar"}, node="machine2", name="e2")],
        {"machine3", "machine4"}, id="hostname-anti-affinity-spreads-replicas"),
    pytest.param(make_pod("p").labels({"foo": "bar"}).obj(),
                 [affinity_pod("existing").labels({"app": "db"}).node("machine1")
                  .pod_anti_affinity("zone", FOO_BAR).obj()],
                 {"machine2", "machine3", "machine4"}, id="existing-anti-affinity-per-zone"),
    pytest.param(affinity_pod().pod_affinity("region", FOO_BAR).pod_affinity("zone", FOO_BAR)
                 .obj(), [_existing({"foo": "bar"})], {"machine1"},
                 id="every-term-must-hold"),
    pytest.param(affinity_pod().pod_affinity("region", FOO_BAR).obj(),
                 [_existing({"foo": "bar"}, namespace="other")], set(),
                 id="terms-default-to-the-pods-own-namespace"),
    pytest.param(affinity_pod().pod_affinity("region", FOO_BAR, namespace_selector={}).obj(),
                 [_existing({"foo": "bar"}, namespace="other")], {"machine1", "machine2"},
                 id="empty-namespaceSelector-means-every-namespace"),
    pytest.param(affinity_pod().pod_affinity("region", FOO_BAR, namespace_selector={
        "matchLabels": {"team": "a"}}).obj(),
        [_existing({"foo": "bar"}, namespace="team-a"),
         _existing({"foo": "bar"}, namespace="team-b", node="machine3", name="b")],
        {"machine1", "machine2"}, id="namespaceSelector-picks-namespaces-by-label"),
    pytest.param(make_pod("p").namespace("team-a").labels({"foo": "bar"}).obj(),
                 [affinity_pod("existing").node("machine3").pod_anti_affinity(
                     "region", FOO_BAR, namespace_selector={"matchLabels": {"team": "a"}})
                  .obj()], {"machine1", "machine2", "machine4"},
                 id="existing-pods-namespaceSelector-sees-the-incoming-pods-namespace"),
])
def test_inter_pod_affinity_filter_multiple_nodes(pod: Obj, pods: list[Obj],
                                                  fits: set[str]) -> None:
    env = make_env([R1Z1, R1Z2, R2Z3, BARE], pods,
                   namespaces={"default": {}, "other": {}, "team-a": {"team": "a"},
                               "team-b": {"team": "b"}})
    results = filter_results(env, pod)
    assert {n for n, reason in results.items() if not reason} == fits


def test_inter_pod_affinity_match_label_keys_narrow_the_selector() -> None:
    """matchLabelKeys adds `key in (the pod's value)`, mismatchLabelKeys `notin`."""
    pods = [_existing({"app": "web", "rev": "1"}),
            _existing({"app": "web", "rev": "2"}, node="machine3", name="e3")]
    same_rev = affinity_pod().labels({"rev": "2"}).pod_affinity("region", {
        "matchLabels": {"app": "web"}}).obj()
    same_rev["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]["matchLabelKeys"] = ["rev"]
    results = filter_results(make_env([R1Z1, R1Z2, R2Z3], pods), same_rev)
    assert {n for n, r in results.items() if not r} == {"machine3"}
    other_rev = affinity_pod().labels({"rev": "2"}).pod_anti_affinity("region", {
        "matchLabels": {"app": "web"}}).obj()
    other_rev["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]["mismatchLabelKeys"] = ["rev"]
    results = filter_results(make_env([R1Z1, R1Z2, R2Z3], pods), other_rev)
    assert {n for n, r in results.items() if not r} == {"machine3"}


def test_inter_pod_affinity_add_and_remove_pod_for_preemption() -> None:
    """Removing the only pod that repels the incoming one frees its zone; adding it back
    (or adding a nominated pod) closes it again."""
    env = make_env([R1Z1, R1Z2], [affinity_pod("existing").labels({"app": "db"})
                                  .node("machine1").pod_anti_affinity("region", FOO_BAR)
                                  .obj()])
    info = PodInfo.from_pod(make_pod("p").labels({"foo": "bar"}).obj())
    state = CycleState()
    assert env.fwk.run_pre_filter(state, info).ok
    node1 = env.cache.get("machine1")
    node2 = env.cache.get("machine2")
    assert node1 is not None and node2 is not None
    assert not env.fwk.run_filter(state, info, node2).ok
    existing = node1.pods[0]
    p = plugin(env.fwk, "InterPodAffinity")
    p.remove_pod(state, info, existing, node1)
    assert env.fwk.run_filter(state, info, node2).ok
    p.add_pod(state, info, existing, node1)
    assert env.fwk.run_filter(state, info, node2).message == EXISTING
