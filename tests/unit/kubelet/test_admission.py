"""Kubelet admission (skiff.kubelet.admission): Kubernetes' canAdmitPod verdicts, reasons
and messages, as pure logic."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.kubelet.admission import Admission

NODE = {"cpu": "2", "memory": "1Gi", "pods": "3"}


def pod(cpu: str | None = None, memory: str | None = None, *, priority: int | None = None,
        tolerations: list[Obj] | None = None, init: list[Obj] | None = None,
        extra: dict[str, str] | None = None) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v} | (extra or {})
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": requests}
                                 if requests else {}}]}
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = tolerations
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def admission(pressure: bool = False, allocatable: dict[str, str] | None = None) -> Admission:
    return Admission(allocatable=allocatable or NODE, memory_pressure=lambda: pressure)


def test_best_effort_pods_are_refused_under_memory_pressure_with_reason_evicted() -> None:
    rejection = admission(pressure=True).admit(pod(), [])
    assert rejection is not None
    assert rejection.reason == "Evicted"
    assert rejection.message == "The node had condition: [MemoryPressure]. "


def test_memory_pressure_admits_burstable_tolerating_and_critical_pods() -> None:
    under = admission(pressure=True)
    assert under.admit(pod(cpu="100m"), []) is None
    assert under.admit(pod(tolerations=[{"key": "node.kubernetes.io/memory-pressure",
                                         "operator": "Exists", "effect": "NoSchedule"}]),
                       []) is None
    assert under.admit(pod(tolerations=[{"operator": "Exists"}]), []) is None
    assert under.admit(pod(priority=2_000_000_000), []) is None
    # A toleration of another taint does not help.
    assert under.admit(pod(tolerations=[{"key": "node.kubernetes.io/disk-pressure",
                                         "operator": "Exists"}]), []) is not None


def test_cpu_beyond_allocatable_minus_admitted_requests_is_out_of_cpu() -> None:
    rejection = admission().admit(pod(cpu="500m"), [pod(cpu="1800m")])
    assert rejection is not None
    assert rejection.reason == "OutOfcpu"
    assert rejection.message == ("Node didn't have enough resource: cpu, requested: 500, "
                                 "used: 1800, capacity: 2000")
    assert admission().admit(pod(cpu="200m"), [pod(cpu="1800m")]) is None


def test_memory_is_checked_after_cpu_in_bytes() -> None:
    rejection = admission().admit(pod(memory="512Mi"), [pod(memory="768Mi")])
    assert rejection is not None and rejection.reason == "OutOfmemory"
    assert "requested: 536870912, used: 805306368, capacity: 1073741824" in rejection.message
    both = admission().admit(pod(cpu="3", memory="2Gi"), [])
    assert both is not None and both.reason == "OutOfcpu"  # the first failing check decides


def test_pod_count_is_checked_first() -> None:
    rejection = admission().admit(pod(cpu="3"), [pod(), pod(), pod()])
    assert rejection is not None
    assert rejection.reason == "OutOfpods"
    assert rejection.message == ("Node didn't have enough resource: pods, requested: 1, "
                                 "used: 3, capacity: 3")


def test_pods_without_requests_always_fit_the_resources() -> None:
    assert admission().admit(pod(), [pod(cpu="2", memory="1Gi")]) is None


def test_init_containers_count_as_kubernetes_pod_requests() -> None:
    # An init container asking more than the app containers sets the pod's request.
    big_init = pod(cpu="100m", init=[{"name": "i", "resources": {"requests": {"cpu": "2500m"}}}])
    rejection = admission().admit(big_init, [])
    assert rejection is not None and "requested: 2500" in rejection.message


def test_extended_resources_are_checked_only_where_the_node_advertises_them() -> None:
    gpu = pod(extra={"example.com/gpu": "2"})
    assert admission().admit(gpu, []) is None  # not advertised: not the kubelet's to check
    with_gpus = admission(allocatable={**NODE, "example.com/gpu": "1"})
    rejection = with_gpus.admit(gpu, [])
    assert rejection is not None and rejection.reason == "OutOfexample.com/gpu"
