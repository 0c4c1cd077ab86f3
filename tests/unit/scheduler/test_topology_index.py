"""The cache's per-domain index (what PodTopologySpread's PreFilter counts from) must give
exactly the counts of Kubernetes' scan over every node (SPEC TS1), whatever happened to
the cluster since the index was built: pods added, removed, terminating, assumed and
forgotten; nodes added, relabelled, removed, or seen only after their pods."""

from __future__ import annotations

import random

import pytest

from skiff.api.testing import DO_NOT_SCHEDULE, make_node, make_pod
from skiff.scheduler.cache import Cache
from skiff.scheduler.plugins.podtopologyspread.common import filter_constraints
from skiff.scheduler.plugins.podtopologyspread.filtering import (
    PreFilterState,
    compute_pre_filter_state,
    compute_pre_filter_state_from_domains,
)
from skiff.scheduler.podinfo import NodeFacts, PodInfo

ZONE = "topology.kubernetes.io/zone"
RACK = "rack"


def _node(rng: random.Random, name: str) -> NodeFacts:
    builder = make_node(name).capacity({"cpu": "4", "memory": "8Gi", "pods": "110"})
    if rng.random() < 0.9:
        builder.label(ZONE, f"zone-{rng.randrange(3)}")
    if rng.random() < 0.9:
        builder.label(RACK, f"rack-{rng.randrange(4)}")
    return NodeFacts.from_node(builder.obj())


def _pod(rng: random.Random, name: str, node: str) -> PodInfo:
    builder = make_pod(name).namespace(rng.choice(["default", "other"]))
    builder.label("app", rng.choice(["web", "db"])).node(node)
    if rng.random() < 0.2:
        builder.terminating()
    return PodInfo.from_pod(builder.obj())


def _summary(state: PreFilterState) -> tuple[object, ...]:
    return (state.tp_pair_to_match_num, state.tp_key_to_domains_num,
            {k: v.paths[0][1] for k, v in state.tp_key_to_critical_paths.items()})


@pytest.mark.parametrize("keys", [
    pytest.param((ZONE,), id="one-key"),
    pytest.param((ZONE, ZONE), id="two-constraints-same-key"),
    pytest.param((ZONE, RACK), id="two-keys"),
])
@pytest.mark.parametrize("seed", range(5))
def test_ts1_domain_index_counts_equal_the_node_scan(keys: tuple[str, ...],
                                                     seed: int) -> None:
    rng = random.Random(seed)
    cache = Cache()
    incoming = PodInfo.from_pod(make_pod("incoming").label("app", "web").obj())
    raw = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": DO_NOT_SCHEDULE,
            "labelSelector": {"matchLabels": {"app": "web"}}} for key in keys]
    constraints = filter_constraints(raw, incoming.labels, DO_NOT_SCHEDULE)
    node_names = [f"n{i}" for i in range(12)]
    pods: dict[str, PodInfo] = {}
    used_index = 0
    for step in range(400):
        action = rng.random()
        if action < 0.08:
            cache.add_node(_node(rng, rng.choice(node_names)))  # new or relabelled
        elif action < 0.12:
            cache.remove_node(rng.choice(node_names))
        elif action < 0.55 or not pods:
            pod = _pod(rng, f"p{step}", rng.choice(node_names))
            pods[pod.key] = pod
            if rng.random() < 0.3:
                cache.assume_pod(pod)
            else:
                cache.add_pod(pod)
        elif action < 0.65:
            key = rng.choice(sorted(pods))
            cache.forget_pod(key)
            if not cache.has_pod(key):
                del pods[key]
        elif action < 0.75:
            key = rng.choice(sorted(pods))
            updated = _pod(rng, pods[key].name, pods[key].node_name)
            pods[updated.key] = updated
            cache.update_pod(updated)
        else:
            key = rng.choice(sorted(pods))
            cache.remove_pod(key)
            del pods[key]
        from_index = compute_pre_filter_state_from_domains(incoming, constraints, cache)
        scanned = compute_pre_filter_state(incoming, constraints, cache.node_infos())
        if from_index is not None:
            used_index += 1
            assert _summary(from_index) == _summary(scanned), f"step {step}"
    assert used_index > 0


def test_ts1_index_steps_aside_when_node_affinity_limits_counting() -> None:
    cache = Cache()
    cache.add_node(NodeFacts.from_node(make_node("a").label(ZONE, "z1").obj()))
    pod = PodInfo.from_pod(make_pod("p").label("app", "web").node_selector({"x": "y"}).obj())
    raw = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": DO_NOT_SCHEDULE,
            "labelSelector": {"matchLabels": {"app": "web"}}}]
    constraints = filter_constraints(raw, pod.labels, DO_NOT_SCHEDULE)
    assert compute_pre_filter_state_from_domains(pod, constraints, cache) is None
