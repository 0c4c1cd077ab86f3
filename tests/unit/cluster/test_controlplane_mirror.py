"""Which component is which mirror pod, on which Node, in what phase."""

from __future__ import annotations

from skiff.api import wellknown
from skiff.cluster.controlplane import mirror
from skiff.cluster.state import Component


def comp(name: str, argv: list[str] | None = None) -> Component:
    return Component(name, 4242, "127.0.0.1:1", "", f"/logs/{name}.log",
                     argv or ["python", "-m", name])


def test_defect10_components_are_kubeadms_static_pods_on_kinds_control_plane_nodes() -> None:
    names = {c: (p.name if (p := mirror.static_pod_of(comp(c))) else None) for c in (
        "etcd", "apiserver", "scheduler", "controller-manager", "etcd-3", "apiserver-2",
        "controller-manager-2", "kubelet-node-1", "fence-agent", "gateway", "control-plane")}
    assert names == {
        "etcd": "etcd-skiff-control-plane",
        "apiserver": "kube-apiserver-skiff-control-plane",
        "scheduler": "kube-scheduler-skiff-control-plane",
        "controller-manager": "kube-controller-manager-skiff-control-plane",
        "etcd-3": "etcd-skiff-control-plane3",
        "apiserver-2": "kube-apiserver-skiff-control-plane2",
        "controller-manager-2": "kube-controller-manager-skiff-control-plane2",
        "kubelet-node-1": None, "fence-agent": None, "gateway": None, "control-plane": None}


def test_defect10_the_mirror_pod_carries_the_kubelets_annotations_and_kubeadms_labels(
        ) -> None:
    c = comp("apiserver-2")
    pod = mirror.static_pod_of(c)
    assert pod is not None
    obj = mirror.mirror_pod(pod, c, node_uid="u-1", seen="2026-01-01T00:00:00.000000Z")
    meta = obj["metadata"]
    assert meta["namespace"] == "kube-system"
    assert meta["labels"] == {"component": "kube-apiserver", "tier": "control-plane"}
    digest = meta["annotations"][wellknown.MIRROR_POD_ANNOTATION]
    assert digest == meta["annotations"][wellknown.CONFIG_HASH_ANNOTATION] == pod.config_hash(c)
    assert meta["annotations"][wellknown.CONFIG_SOURCE_ANNOTATION] == "file"
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node",
                                        "name": "skiff-control-plane2", "uid": "u-1",
                                        "controller": True}]
    assert obj["spec"]["nodeName"] == "skiff-control-plane2"
    # another command line is another static pod (a new hash), as an edited manifest
    assert pod.config_hash(comp("apiserver-2", ["other"])) != digest


def test_defect10_phase_and_restarts_follow_the_supervisor() -> None:
    c = comp("scheduler")
    pod = mirror.static_pod_of(c)
    assert pod is not None

    def status(running: bool, held: bool, restarts: int) -> dict[str, object]:
        view = mirror.ProcessView(running=running, held_down=held,
                                  started_at="2026-01-01T00:00:00Z", restarts=restarts)
        return mirror.pod_status(pod, c, view, host_ip="127.0.0.1",
                                 start_time="2026-01-01T00:00:00Z",
                                 now="2026-01-01T00:00:01Z")

    up, crashed, held = status(True, False, 2), status(False, False, 3), status(False, True, 3)
    assert up["phase"] == "Running" and crashed["phase"] == "Running"
    assert held["phase"] == "Failed"
    assert [s["containerStatuses"][0]["restartCount"]  # type: ignore[index]
            for s in (up, crashed, held)] == [2, 3, 3]
    assert [next(iter(s["containerStatuses"][0]["state"]))  # type: ignore[index]
            for s in (up, crashed, held)] == ["running", "waiting", "terminated"]
    assert mirror.status_fingerprint(up) != mirror.status_fingerprint(crashed)


def test_defect10_a_running_component_failing_its_health_check_is_not_ready() -> None:
    c = comp("apiserver")
    pod = mirror.static_pod_of(c)
    assert pod is not None
    view = mirror.ProcessView(running=True, held_down=False, started_at="", restarts=0,
                              healthy=False)
    status = mirror.pod_status(pod, c, view, host_ip="127.0.0.1", start_time="",
                               now="2026-01-01T00:00:01Z")
    assert status["phase"] == "Running"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == conditions["ContainersReady"] == "False"
    assert status["containerStatuses"][0]["ready"] is False
    assert status["containerStatuses"][0]["started"] is True
