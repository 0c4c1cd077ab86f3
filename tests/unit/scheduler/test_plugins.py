"""SPEC TS5: NodeName, NodeUnschedulable, NodeAffinity (nodeSelector, required and
preferred terms), TaintToleration and NodeResourcesFit, as tables of cases."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, make_node, make_pod
from tests.unit.scheduler.helpers import filter_results, make_env, plugin_scores


def _affinity(required: list[dict[str, Any]] | None = None,
              preferred: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": required}
    if preferred is not None:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"nodeAffinity": node_affinity}


def _with(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod["spec"].update(spec)
    return pod


NODES = [make_node("n1").label("disk", "ssd").label("gen", "3").obj(),
         make_node("n2").label("disk", "hdd").label("gen", "5").obj(),
         make_node("n3").obj()]
AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"


@pytest.mark.parametrize(("pod", "fits"), [
    pytest.param(make_pod().obj(), {"n1", "n2", "n3"}, id="no-constraints"),
    pytest.param(make_pod().node_selector({"disk": "ssd"}).obj(), {"n1"}, id="nodeSelector"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([{"matchExpressions": [
        {"key": "disk", "operator": "In", "values": ["ssd", "hdd"]}]}])), {"n1", "n2"},
        id="required-In"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([{"matchExpressions": [
        {"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}])), {"n2", "n3"},
        id="required-NotIn-matches-missing-label"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([{"matchExpressions": [
        {"key": "disk", "operator": "DoesNotExist"}]}])), {"n3"}, id="required-DoesNotExist"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([{"matchExpressions": [
        {"key": "gen", "operator": "Gt", "values": ["4"]}]}])), {"n2"}, id="required-Gt"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([
        {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}])),
        {"n1", "n3"}, id="terms-are-ORed-and-matchFields-name"),
    pytest.param(_with(make_pod().node_selector({"disk": "ssd"}).obj(), affinity=_affinity(
        [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}])),
        set(), id="nodeSelector-AND-affinity"),
    pytest.param(_with(make_pod().obj(), affinity=_affinity([{}])), set(),
                 id="empty-term-matches-nothing"),
])
def test_ts5_node_affinity_filter(pod: dict[str, Any], fits: set[str]) -> None:
    results = filter_results(make_env(NODES), pod)
    assert {n for n, r in results.items() if not r} == fits
    assert {r for r in results.values() if r} <= {AFFINITY_REASON}


def test_ts5_node_affinity_preferred_terms_score() -> None:
    pod = _with(make_pod().obj(), affinity=_affinity(preferred=[
        {"weight": 2, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 8, "preference": {"matchExpressions": [
            {"key": "gen", "operator": "Exists"}]}}]))
    env = make_env(NODES)
    assert plugin_scores(env, "NodeAffinity", pod, normalize=False) == {"n1": 10, "n2": 8,
                                                                          "n3": 0}
    assert plugin_scores(env, "NodeAffinity", pod) == {"n1": 100, "n2": 80, "n3": 0}


def test_ts5_node_name_filter() -> None:
    results = filter_results(make_env(NODES), make_pod().node("n2").obj())
    assert results == {"n1": "node(s) didn't match the requested node name", "n2": "",
                       "n3": "node(s) didn't match the requested node name"}


@pytest.mark.parametrize(("pod", "fits"), [
    pytest.param(make_pod().obj(), {"n1"}, id="cordoned-node-refused"),
    pytest.param(make_pod().toleration("node.kubernetes.io/unschedulable", operator="Exists",
                                       effect=NO_SCHEDULE).obj(), {"n1", "n2"},
                 id="unless-tolerated"),
])
def test_ts5_node_unschedulable(pod: dict[str, Any], fits: set[str]) -> None:
    nodes = [make_node("n1").obj(), make_node("n2").unschedulable().obj()]
    results = filter_results(make_env(nodes), pod)
    assert {n for n, r in results.items() if not r} == fits
    assert {r for r in results.values() if r} <= {"node(s) were unschedulable"}


TAINTED = [make_node("clean").obj(),
           make_node("gpu").taint("gpu", NO_SCHEDULE, "true").obj(),
           make_node("drain").taint("drain", NO_EXECUTE).obj(),
           make_node("soft").taint("spot", PREFER_NO_SCHEDULE, "yes").obj()]


@pytest.mark.parametrize(("pod", "fits"), [
    pytest.param(make_pod().obj(), {"clean", "soft"}, id="no-tolerations"),
    pytest.param(make_pod().toleration("gpu", value="true", effect=NO_SCHEDULE).obj(),
                 {"clean", "gpu", "soft"}, id="equal-key-value-effect"),
    pytest.param(make_pod().toleration("gpu", value="false").obj(), {"clean", "soft"},
                 id="wrong-value"),
    pytest.param(make_pod().toleration("drain", operator="Exists").obj(),
                 {"clean", "drain", "soft"}, id="exists-any-effect"),
    pytest.param(make_pod().toleration(operator="Exists").obj(),
                 {"clean", "gpu", "drain", "soft"}, id="empty-key-exists-tolerates-all"),
    pytest.param(make_pod().toleration("gpu", value="true", effect=NO_EXECUTE).obj(),
                 {"clean", "soft"}, id="wrong-effect"),
])
def test_ts5_taint_toleration_filter(pod: dict[str, Any], fits: set[str]) -> None:
    results = filter_results(make_env(TAINTED), pod)
    assert {n for n, r in results.items() if not r} == fits
    reasons = {n: r for n, r in results.items() if r}
    assert reasons.get("gpu", "node(s) had untolerated taint {gpu: true}") == \
        "node(s) had untolerated taint {gpu: true}"
    assert reasons.get("drain", "node(s) had untolerated taint {drain: }") == \
        "node(s) had untolerated taint {drain: }"


def test_ts5_taint_toleration_score_prefers_fewer_prefer_no_schedule_taints() -> None:
    nodes = [make_node("a").obj(), make_node("b").taint("x", PREFER_NO_SCHEDULE).obj(),
             make_node("c").taint("x", PREFER_NO_SCHEDULE).taint("y", PREFER_NO_SCHEDULE)
             .obj()]
    env = make_env(nodes)
    assert plugin_scores(env, "TaintToleration", make_pod().obj()) == {"a": 100, "b": 50,
                                                                        "c": 0}
    tolerant = make_pod().toleration("x", operator="Exists", effect=PREFER_NO_SCHEDULE).obj()
    assert plugin_scores(env, "TaintToleration", tolerant) == {"a": 100, "b": 100, "c": 0}


RESOURCE_NODES = [make_node("small").capacity({"cpu": "1", "memory": "1Gi", "pods": "2"})
                  .obj(),
                  make_node("big").capacity({"cpu": "4", "memory": "8Gi"}).obj()]
RESOURCE_PODS = [make_pod("used").node("small").req({"cpu": "500m", "memory": "512Mi"}).obj()]


@pytest.mark.parametrize(("pod", "small"), [
    pytest.param(make_pod().req({"cpu": "500m"}).obj(), "", id="fits-exactly"),
    pytest.param(make_pod().req({"cpu": "600m"}).obj(), "Insufficient cpu", id="cpu"),
    pytest.param(make_pod().req({"cpu": "600m", "memory": "1Gi"}).obj(),
                 "Insufficient cpu, Insufficient memory", id="every-short-resource"),
    pytest.param(make_pod().req({"cpu": "100m"}).init_container(
        "init", requests={"cpu": "900m"}).obj(), "Insufficient cpu",
        id="init-container-peak-counts"),
])
def test_ts5_node_resources_fit_filter(pod: dict[str, Any], small: str) -> None:
    results = filter_results(make_env(RESOURCE_NODES, RESOURCE_PODS), pod)
    assert results == {"small": small, "big": ""}


OVERCOMMITTED = [make_node("full").capacity({"cpu": "1", "memory": "1Gi",
                                              "ephemeral-storage": "10Gi",
                                              "example.com/gpu": "2"}).obj()]
OVERCOMMITTING = [make_pod("hog").node("full").req({"cpu": "1500m"}).obj(),
                  make_pod("gpu").node("full").req({"example.com/gpu": "1",
                                                    "ephemeral-storage": "4Gi"}).obj()]


@pytest.mark.parametrize(("requests", "reason"), [
    pytest.param({"memory": "256Mi"}, "", id="memory-only-pod-ignores-overcommitted-cpu"),
    pytest.param({}, "", id="best-effort-pod"),
    pytest.param({"memory": "2Gi"}, "Insufficient memory", id="memory"),
    pytest.param({"cpu": "1m"}, "Insufficient cpu", id="cpu-requested"),
    pytest.param({"example.com/gpu": "1"}, "", id="extended-resource-fits"),
    pytest.param({"example.com/gpu": "2"}, "Insufficient example.com/gpu",
                 id="extended-resource-short"),
    pytest.param({"example.com/fpga": "1"}, "Insufficient example.com/fpga",
                 id="extended-resource-the-node-lacks"),
    pytest.param({"ephemeral-storage": "7Gi"}, "Insufficient ephemeral-storage",
                 id="ephemeral-storage"),
    pytest.param({"hugepages-2Mi": "4Mi"}, "Insufficient hugepages-2Mi", id="hugepages"),
])
def test_ts5_fits_request_checks_only_requested_resources(requests: dict[str, str],
                                                           reason: str) -> None:
    """Kubernetes' fitsRequest: cpu/memory/ephemeral-storage only when requested, scalar
    resources against the node's allocatable, one "Insufficient <name>" each."""
    pod = make_pod().req(requests).obj() if requests else make_pod().obj()
    assert filter_results(make_env(OVERCOMMITTED, OVERCOMMITTING), pod) == {"full": reason}


def test_ts5_ignored_extended_resources_are_not_checked() -> None:
    config = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"ignoredResourceGroups": ["example.com"]}}]}]}
    env = make_env(OVERCOMMITTED, OVERCOMMITTING, config=config)
    assert filter_results(env, make_pod().req({"example.com/gpu": "5"}).obj()) == {
        "full": ""}


def test_ts5_too_many_pods() -> None:
    pods = RESOURCE_PODS + [make_pod("other").node("small").obj()]
    results = filter_results(make_env(RESOURCE_NODES, pods), make_pod().obj())
    assert results["small"] == "Too many pods"


def test_ts5_least_allocated_score() -> None:
    env = make_env(RESOURCE_NODES, RESOURCE_PODS)
    pod = make_pod().req({"cpu": "250m", "memory": "256Mi"}).obj()
    # small: cpu (1000−750)×100/1000 = 25, memory (1024−768)×100/1024 = 25 → 25
    # big: cpu (4000−250)×100/4000 = 93, memory (8192−256)×100/8192 = 96 → (93+96)//2 = 94
    assert plugin_scores(env, "NodeResourcesFit", pod) == {"small": 25, "big": 94}
    # A pod without requests scores with 100m / 200Mi.
    assert plugin_scores(env, "NodeResourcesFit", make_pod().obj())["big"] == (
        (4000 - 100) * 100 // 4000 + (8192 - 200) * 100 // 8192) // 2
