"""The rest of Kubernetes 1.32's default profile: NodePorts (hostPort conflicts),
NodeResourcesBalancedAllocation (1 − std of the cpu/memory fractions), ImageLocality
(node status.images, scaled by how many nodes have the image), VolumeBinding (claims
must exist) and VolumeRestrictions (ReadWriteOncePod)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from skiff.scheduler.algorithm import Algorithm
from skiff.scheduler.framework import CycleState, FitError
from skiff.scheduler.plugins.imagelocality import calculate_priority
from skiff.scheduler.plugins.nodeports import ERR_REASON
from skiff.scheduler.podinfo import PodInfo
from tests.unit.scheduler.helpers import filter_results, make_env, plugin, plugin_scores


def _with_ports(name: str, *ports: dict[str, Any], node: str = "",
                host_network: bool = False) -> Obj:
    builder = make_pod(name)
    if node:
        builder.node(node)
    pod = builder.obj()
    pod["spec"]["containers"][0]["ports"] = [dict(p) for p in ports]
    if host_network:
        pod["spec"]["hostNetwork"] = True
    return pod


USED = [_with_ports("used", {"containerPort": 80, "hostPort": 8080}, node="n1"),
        _with_ports("udp", {"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                            "hostIP": "127.0.0.1"}, node="n1")]


@pytest.mark.parametrize(("ports", "reason"), [
    pytest.param([{"containerPort": 80}], "", id="no-host-port"),
    pytest.param([{"containerPort": 80, "hostPort": 8080}], ERR_REASON, id="same-port"),
    pytest.param([{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}], "",
                 id="other-protocol"),
    pytest.param([{"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.2"}],
                 ERR_REASON, id="used-on-0.0.0.0-conflicts-with-any-ip"),
    pytest.param([{"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                   "hostIP": "127.0.0.2"}], "", id="different-ips"),
    pytest.param([{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}], ERR_REASON,
                 id="wanted-on-0.0.0.0-conflicts-with-a-specific-ip"),
])
def test_node_ports_filter(ports: list[dict[str, Any]], reason: str) -> None:
    env = make_env([make_node("n1").obj(), make_node("n2").obj()], USED)
    assert filter_results(env, _with_ports("p", *ports)) == {"n1": reason, "n2": ""}


def test_node_ports_host_network_pod_binds_its_container_ports() -> None:
    env = make_env([make_node("n1").obj()], USED)
    pod = _with_ports("p", {"containerPort": 8080}, host_network=True)
    assert filter_results(env, pod) == {"n1": ERR_REASON}


def test_balanced_allocation_prefers_balanced_nodes() -> None:
    """n1: cpu 3/4, memory 2/8 with the pod → 100 × (1 − |0.75 − 0.25| / 2) = 75;
    n2: cpu 1/4, memory 2/8 → 100."""
    nodes = [make_node("n1").capacity({"cpu": "4", "memory": "8Gi"}).obj(),
             make_node("n2").capacity({"cpu": "4", "memory": "8Gi"}).obj()]
    pods = [make_pod("busy").node("n1").req({"cpu": "2"}).obj()]
    pod = make_pod("p").req({"cpu": "1", "memory": "2Gi"}).obj()
    scores = plugin_scores(make_env(nodes, pods), "NodeResourcesBalancedAllocation", pod)
    assert scores == {"n1": 75, "n2": 100}


def _with_images(name: str, images: list[tuple[list[str], int]]) -> Obj:
    node = make_node(name).obj()
    node["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return node


MB = 1024 * 1024


def test_image_locality_scores_nodes_with_the_image() -> None:
    """Kubernetes' formula: size × (nodes with the image / all nodes), clamped to
    [23 MiB, 1000 MiB × containers] and mapped onto [0, 100]."""
    nodes = [_with_images("n1", [(["registry.io/app:v1"], 500 * MB)]),
             _with_images("n2", [(["registry.io/app:v1"], 500 * MB), (["busybox:latest"],
                                                                      300 * MB)]),
             make_node("n3").obj()]
    pod = make_pod("p").obj()
    pod["spec"]["containers"][0]["image"] = "registry.io/app:v1"
    pod["spec"]["containers"].append({"name": "b", "image": "busybox"})
    scores = plugin_scores(make_env(nodes), "ImageLocality", pod)
    one = int(500 * MB * (2 / 3))
    two = one + int(300 * MB * (1 / 3))
    assert scores == {"n1": calculate_priority(one, 2), "n2": calculate_priority(two, 2),
                      "n3": 0}
    assert 0 < scores["n1"] < scores["n2"]


def test_image_locality_scores_0_when_no_node_reports_images() -> None:
    env = make_env([make_node("n1").obj(), make_node("n2").obj()])
    assert plugin_scores(env, "ImageLocality", make_pod("p").obj()) == {"n1": 0, "n2": 0}


def _claim(name: str, *modes: str, deleting: bool = False, phase: str = "Bound",
           storage_class: str = "") -> Obj:
    """Bound (a volume named, the binder's annotation set) unless phase says Pending."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"accessModes": list(modes)}
    if storage_class:
        spec["storageClassName"] = storage_class
    if phase == "Bound":
        spec["volumeName"] = f"pv-{name}"
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": spec, "status": {"phase": phase}}


def _using(name: str, *claims: str, node: str = "") -> Obj:
    builder = make_pod(name)
    for claim in claims:
        builder.volume(f"v-{claim}", {"persistentVolumeClaim": {"claimName": claim}})
    if node:
        builder.node(node)
    return builder.obj()


@pytest.mark.parametrize(("claims", "reason"), [
    pytest.param([], 'persistentvolumeclaim "data" not found', id="missing-claim"),
    pytest.param([_claim("data", "ReadWriteOnce", deleting=True)],
                 'persistentvolumeclaim "data" is being deleted', id="claim-being-deleted"),
    pytest.param([_claim("data", "ReadWriteOnce")], "", id="existing-claim"),
    pytest.param([_claim("data", "ReadWriteOnce", phase="Pending", storage_class="fast")],
                 "pod has unbound immediate PersistentVolumeClaims", id="unbound-immediate"),
    pytest.param([_claim("data", "ReadWriteOnce", phase="Pending", storage_class="missing")],
                 "pod has unbound immediate PersistentVolumeClaims",
                 id="unbound-class-does-not-exist"),
    pytest.param([_claim("data", "ReadWriteOnce", phase="Pending")],
                 "pod has unbound immediate PersistentVolumeClaims", id="unbound-no-class"),
    pytest.param([_claim("data", "ReadWriteOnce", phase="Pending", storage_class="late")], "",
                 id="unbound-wait-for-first-consumer"),
])
def test_volume_binding_claims_must_exist(claims: list[Obj], reason: str) -> None:
    """Kubernetes' VolumeBinding PreFilter (podHasPVCs, then GetPodVolumeClaims):
    UnschedulableAndUnresolvable with the claim's problem as the whole message. Only a
    claim of an existing WaitForFirstConsumer class may wait for the scheduler."""
    env = make_env([make_node("n1").obj()])
    env.listers.storage_classes["fast"] = {"metadata": {"name": "fast"},
                                           "volumeBindingMode": "Immediate"}
    env.listers.storage_classes["late"] = {"metadata": {"name": "late"},
                                           "volumeBindingMode": "WaitForFirstConsumer"}
    for claim in claims:
        env.listers.claims[("default", claim["metadata"]["name"])] = claim
    pod = PodInfo.from_pod(_using("p", "data"))
    if not reason:
        assert Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(), pod)
        return
    with pytest.raises(FitError) as failure:
        Algorithm(cache=env.cache).schedule_pod(env.fwk, CycleState(), pod)
    assert str(failure.value) == f"0/1 nodes are available: {reason}."


def test_volume_restrictions_read_write_once_pod_claim_has_one_user() -> None:
    """A ReadWriteOncePod claim already used by a scheduled pod fits no node; a
    ReadWriteOnce claim is not the scheduler's to restrict (attach/detach does)."""
    nodes = [make_node("n1").obj(), make_node("n2").obj()]
    env = make_env(nodes, [_using("holder", "solo", "shared", node="n1")])
    env.listers.claims[("default", "solo")] = _claim("solo", "ReadWriteOncePod")
    env.listers.claims[("default", "shared")] = _claim("shared", "ReadWriteOnce")
    conflict = ("node has pod using PersistentVolumeClaim with the same name and "
                "ReadWriteOncePod access mode")
    assert filter_results(env, _using("p", "solo")) == {"n1": conflict, "n2": conflict}
    assert filter_results(env, _using("p", "shared")) == {"n1": "", "n2": ""}


@pytest.mark.parametrize("name", ["NodeResourcesFit", "NodeResourcesBalancedAllocation"])
def test_batch_scores_equal_per_node_scores(name: str) -> None:
    """The batch path the framework uses gives exactly the per-node Score results."""
    nodes = [make_node("n1").capacity({"cpu": "4", "memory": "8Gi"}).obj(),
             make_node("n2").capacity({"cpu": "1", "memory": "1Gi"}).obj(),
             make_node("n3").capacity({"cpu": "0", "memory": "2Gi"}).obj()]
    pods = [make_pod("a").node("n1").req({"cpu": "3", "memory": "1Gi"}).obj(),
            make_pod("b").node("n2").req({"cpu": "2"}).obj()]
    env = make_env(nodes, pods)
    p = plugin(env.fwk, name)
    info = PodInfo.from_pod(make_pod("p").req({"cpu": "500m", "memory": "3Gi"}).obj())
    infos = env.cache.node_infos()
    state = CycleState()
    assert p.score_nodes(state, info, infos) == [p.score(state, info, n) for n in infos]
