"""SPEC TS3–TS4: PodTopologySpread scoring (weights ln(size + 2), the maxSkew − 1 term,
100 × (max + min − s) / max normalization) and cluster default constraints."""

from __future__ import annotations

import math
from typing import Any

import pytest

from skiff.api.testing import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, make_node, make_pod
from skiff.scheduler.plugins.podtopologyspread.scoring import (
    round_half_away_from_zero,
    score_for_count,
    topology_normalizing_weight,
)
from tests.unit.scheduler.helpers import Listers, filter_results, make_env, plugin_scores

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
HOST = "kubernetes.io/hostname"


def _nodes(*spec: tuple[str, str]) -> list[dict[str, Any]]:
    return [make_node(n).label("zone", z).obj() for n, z in spec]


def _pods(**per_node: int) -> list[dict[str, Any]]:
    return [make_pod(f"{node}-{i}").label("foo", "").node(node.replace("_", "-")).obj()
            for node, n in per_node.items() for i in range(n)]


ABXY = _nodes(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


@pytest.mark.parametrize(("total", "score"), [
    pytest.param(4.16, 4, id="down"), pytest.param(5.55, 6, id="up-not-truncated"),
    pytest.param(2.5, 3, id="half-away-from-zero-not-to-even"),
    pytest.param(0.49999999999999994, 0, id="just-below-half")])
def test_ts3_score_rounds_like_go_math_round(total: float, score: int) -> None:
    assert round_half_away_from_zero(total) == score


def test_ts3_weight_is_ln_size_plus_2() -> None:
    assert topology_normalizing_weight(2) == pytest.approx(math.log(4))
    assert score_for_count(3, 1, math.log(4)) == pytest.approx(3 * math.log(4))
    assert score_for_count(3, 3, math.log(4)) == pytest.approx(3 * math.log(4) + 2)


@pytest.mark.parametrize(("pod", "nodes", "pods", "filtered", "raw", "normalized"), [
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, _pods(node_a=2, node_b=1, node_y=4), None,
        # zone1 = 3, zone2 = 4; weight ln(2 + 2): 3 × 1.386 = 4.16 → 4, 4 × 1.386 = 5.55 → 6
        # (Kubernetes 1.32 rounds; the older truncation gave 5 and normalized 80)
        {"node-a": 4, "node-b": 4, "node-x": 6, "node-y": 6},
        {"node-a": 100, "node-b": 100, "node-x": 66, "node-y": 66},
        id="zone-counts-weighted-then-normalized"),
    pytest.param(
        make_pod("p").label("foo", "").spread(3, "zone", SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, _pods(node_a=2, node_b=1, node_y=4), None,
        # + (maxSkew − 1) = 2: 6.16 → 6 and 7.55 → 8
        {"node-a": 6, "node-b": 6, "node-x": 8, "node-y": 8},
        {"node-a": 100, "node-b": 100, "node-x": 75, "node-y": 75},
        id="maxSkew-minus-1-softens-the-difference"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, HOST, SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, _pods(node_a=2, node_b=1, node_y=4), None,
        # hostname: size = 4 filtered nodes → ln 6 = 1.79; counts per node 2, 1, 0, 4:
        # 3.58 → 4, 1.79 → 2, 0, 7.17 → 7
        {"node-a": 4, "node-b": 2, "node-x": 0, "node-y": 7},
        {"node-a": 42, "node-b": 71, "node-x": 100, "node-y": 0},
        id="hostname-size-is-filtered-nodes"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, HOST, SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, _pods(node_a=2, node_b=1, node_y=4), {"node-a", "node-b"},
        # only two filtered nodes: ln 4; counts still come from every node: 2.77 → 3, 1.39 → 1
        {"node-a": 3, "node-b": 1},
        {"node-a": 33, "node-b": 100},
        id="hostname-size-shrinks-with-filtering"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", SCHEDULE_ANYWAY, FOO).obj(),
        [*ABXY, make_node("bare").obj()], _pods(node_a=2, node_x=1), None,
        # zone1 2 × ln 4 = 2.77 → 3, zone2 1.39 → 1
        {"node-a": 3, "node-b": 3, "node-x": 1, "node-y": 1, "bare": 0},
        {"node-a": 33, "node-b": 33, "node-x": 100, "node-y": 100, "bare": 0},
        id="node-missing-the-key-is-ignored-and-scores-0"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, [], None,
        {"node-a": 0, "node-b": 0, "node-x": 0, "node-y": 0},
        {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100},
        id="max-0-gives-everyone-100"),
    pytest.param(
        make_pod("p").label("foo", "").spread(1, "zone", SCHEDULE_ANYWAY, FOO)
        .spread(1, HOST, SCHEDULE_ANYWAY, FOO).obj(),
        ABXY, _pods(node_a=2, node_b=1, node_y=4), None,
        # zone: ln 4 × (3|4); host: ln 6 × (2|1|0|4), rounded:
        # a 7.74 → 8, b 5.95 → 6, x 5.55 → 6, y 12.71 → 13
        {"node-a": 8, "node-b": 6, "node-x": 6, "node-y": 13},
        {"node-a": 100 * (13 + 6 - 8) // 13, "node-b": 100 * (13 + 6 - 6) // 13,
         "node-x": 100 * (13 + 6 - 6) // 13, "node-y": 100 * (13 + 6 - 13) // 13},
        id="two-constraints-add-up"),
])
def test_ts3_score_and_normalize(pod: dict[str, Any], nodes: list[dict[str, Any]],
                                 pods: list[dict[str, Any]], filtered: set[str] | None,
                                 raw: dict[str, int], normalized: dict[str, int]) -> None:
    env = make_env(nodes, pods)
    names = sorted(filtered) if filtered is not None else None
    assert plugin_scores(env, "PodTopologySpread", pod, names, normalize=False) == raw
    assert plugin_scores(env, "PodTopologySpread", pod, names) == normalized


def test_ts3_do_not_schedule_constraints_do_not_score() -> None:
    env = make_env(ABXY, _pods(node_a=2))
    pod = make_pod("p").label("foo", "").spread(1, "zone", DO_NOT_SCHEDULE, FOO).obj()
    assert set(plugin_scores(env, "PodTopologySpread", pod).values()) == {0}


def test_ts3_plugin_weight_is_2() -> None:
    env = make_env(ABXY)
    assert dict((p.name, w) for p, w in env.fwk.score_plugins)["PodTopologySpread"] == 2


# --- TS4: default constraints -------------------------------------------------------------

LIST_DEFAULTS = {"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {
    "defaultingType": "List",
    "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                            "whenUnsatisfiable": DO_NOT_SCHEDULE}]}}]}]}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
      "metadata": {"name": "web", "namespace": "default"},
      "spec": {"selector": {"matchLabels": {"app": "web"}}}}
CROWDED = [make_pod(f"w{i}").label("app", "web").node("node-a").obj() for i in range(2)]


def _owned(name: str = "new") -> Any:
    return make_pod(name).label("app", "web").owner("ReplicaSet", "web")


@pytest.mark.parametrize(("pod", "fits"), [
    pytest.param(_owned().obj(), {"node-x", "node-y"}, id="owned-pod-gets-defaults"),
    pytest.param(make_pod("new").label("app", "web").obj(),
                 {"node-a", "node-b", "node-x", "node-y"}, id="unowned-pod-does-not"),
    pytest.param(_owned().owner("Deployment", "web", controller=False).obj(),
                 {"node-x", "node-y"}, id="only-the-controller-reference-counts"),
    pytest.param(make_pod("new").label("app", "web").owner("Job", "web",
                                                           api_version="batch/v1").obj(),
                 {"node-a", "node-b", "node-x", "node-y"}, id="other-owner-kinds-do-not"),
    pytest.param(_owned().spread(5, "zone", DO_NOT_SCHEDULE, {"matchLabels": {"app": "web"}})
                 .obj(), {"node-a", "node-b", "node-x", "node-y"},
                 id="own-constraints-replace-the-defaults"),
    pytest.param(_owned().spread(1, HOST, SCHEDULE_ANYWAY, {"matchLabels": {"app": "web"}})
                 .obj(), {"node-a", "node-b", "node-x", "node-y"},
                 id="even-soft-own-constraints-replace-hard-defaults"),
])
def test_ts4_default_constraints_apply_only_to_owned_pods(pod: dict[str, Any],
                                                          fits: set[str]) -> None:
    listers = Listers(owners={("ReplicaSet", "default", "web"): RS})
    env = make_env(ABXY, CROWDED, config=LIST_DEFAULTS, listers=listers)
    results = filter_results(env, pod)
    assert {n for n, r in results.items() if not r} == fits


def test_ts4_owner_missing_from_the_cache_means_no_defaults() -> None:
    env = make_env(ABXY, CROWDED, config=LIST_DEFAULTS, listers=Listers())
    results = filter_results(env, _owned().obj())
    assert all(r == "" for r in results.values())


def test_ts4_system_defaults_score_owned_pods_by_hostname() -> None:
    nodes = [make_node(n).obj() for n in ("n1", "n2")]
    pods = [make_pod(f"w{i}").label("app", "web").node("n1").obj() for i in range(3)]
    listers = Listers(owners={("ReplicaSet", "default", "web"): RS})
    env = make_env(nodes, pods, listers=listers)
    scores = plugin_scores(env, "PodTopologySpread", _owned().obj())
    # hostname maxSkew 3: n1 = 3 × ln 4 + 2 = 6, n2 = 0 + 2 = 2; zone missing → 0 (not
    # required with System defaults): normalized 100 × (6 + 2 − s) / 6
    assert scores == {"n1": 100 * 2 // 6, "n2": 100}
    unowned = plugin_scores(env, "PodTopologySpread", make_pod("x").label("app", "web").obj())
    assert unowned == {"n1": 0, "n2": 0}


@pytest.mark.parametrize(("args", "message"), [
    pytest.param({"defaultingType": "Other"}, "defaultingType: Unsupported value",
                 id="bad-defaulting-type"),
    pytest.param({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DO_NOT_SCHEDULE,
         "labelSelector": {}}]}, "labelSelector: Forbidden", id="selector-in-defaults"),
])
def test_ts4_bad_plugin_args_are_refused(args: dict[str, Any], message: str) -> None:
    config = {"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": args}]}]}
    with pytest.raises(ValueError, match=message):
        make_env(ABXY, config=config)


def test_ts3_empty_label_selector_counts_no_pods() -> None:
    """countPodsMatchSelector counts nothing for `labelSelector: {}`: every node scores
    alike however many pods it runs (zone and hostname constraints)."""
    env = make_env(ABXY, _pods(node_a=2, node_b=1, node_y=4))
    pod = (make_pod("p").label("foo", "").spread(1, "zone", SCHEDULE_ANYWAY, {})
           .spread(1, HOST, SCHEDULE_ANYWAY, {}).obj())
    assert set(plugin_scores(env, "PodTopologySpread", pod).values()) == {100}


def _policy_pod(*, affinity: str | None = None, taints: str | None = None,
                node_selector: bool = False) -> dict[str, Any]:
    builder = make_pod("p").label("foo", "").spread(1, "node", SCHEDULE_ANYWAY, FOO)
    pod = builder.obj()
    constraint = pod["spec"]["topologySpreadConstraints"][0]
    if affinity is not None:
        constraint["nodeAffinityPolicy"] = affinity
    if taints is not None:
        constraint["nodeTaintsPolicy"] = taints
    if node_selector:
        pod["spec"]["nodeSelector"] = {"foo": ""}
    return pod


def _abc(*, foo_on_ab: bool = False, taint_c: bool = False) -> list[dict[str, Any]]:
    nodes = []
    for name in ("node-a", "node-b", "node-c"):
        node = make_node(name).label("node", name)
        if foo_on_ab and name != "node-c":
            node = node.label("foo", "")
        if taint_c and name == "node-c":
            node = node.taint("node.kubernetes.io/unschedulable", "NoSchedule")
        nodes.append(node.obj())
    return nodes


@pytest.mark.parametrize(("pod", "nodes", "normalized"), [
    pytest.param(_policy_pod(node_selector=True), _abc(foo_on_ab=True),
                 {"node-a": 0, "node-b": 33, "node-c": 100},
                 id="NodeAffinityPolicy honored with labelSelectors"),
    pytest.param(_policy_pod(node_selector=True, affinity="Ignore"), _abc(foo_on_ab=True),
                 {"node-a": 66, "node-b": 100, "node-c": 100},
                 id="NodeAffinityPolicy ignored with labelSelectors"),
    pytest.param(_policy_pod(taints="Honor"), _abc(taint_c=True),
                 {"node-a": 0, "node-b": 33, "node-c": 100}, id="NodeTaintsPolicy honored"),
    pytest.param(_policy_pod(), _abc(taint_c=True),
                 {"node-a": 66, "node-b": 100, "node-c": 100}, id="NodeTaintsPolicy ignored"),
])
def test_ts3_node_inclusion_policies_score_as_kubernetes_table(
        pod: dict[str, Any], nodes: list[dict[str, Any]], normalized: dict[str, int]) -> None:
    """Kubernetes' TestPodTopologySpreadScore cases of the same names (scoring_test.go):
    the filtered nodes make the domains (weight ln(3 + 2)), while pods on nodes the policies
    exclude are not counted, so the excluded node-c scores as an empty domain."""
    env = make_env(nodes, [
        *_pods(node_a=2, node_b=1, node_c=1)])
    assert plugin_scores(env, "PodTopologySpread", pod) == normalized
