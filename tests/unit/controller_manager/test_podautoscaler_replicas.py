"""The HPA's arithmetic (Kubernetes' replica_calculator_test.go and the normalization cases of
horizontal_test.go): usage ratios, tolerance, missing and unready pods, and how behavior,
stabilization windows and min/max bound the result."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.clock import rfc3339
from skiff.controller_manager.podautoscaler.behavior import (
    History,
    Recommendation,
    ScaleEvent,
    behavior_from_spec,
    normalize,
)
from skiff.controller_manager.podautoscaler.replicas import (
    MetricsError,
    PodMetric,
    ReplicaCalculator,
    resource_metrics,
)

NOW = 1_795_000_000.0
LONG_AGO = NOW - 3600


def pod(name: str, *, cpu: str = "1", memory: str = "1Gi", phase: str = "Running",
        ready: str | None = "True", started: float | None = LONG_AGO,
        ready_since: float | None = LONG_AGO + 5) -> Obj:
    builder = (make_pod(name).label("app", "web")
               .container("c", requests={"cpu": cpu, "memory": memory}).phase(phase))
    if ready is not None:
        builder = builder.condition("Ready", ready)
    obj = builder.obj()
    if started is not None:
        obj["status"]["startTime"] = rfc3339(started)
    if ready is not None and ready_since is not None:
        obj["status"]["conditions"][0]["lastTransitionTime"] = rfc3339(ready_since)
    return obj


def samples(**milli: int) -> dict[str, PodMetric]:
    return {name: PodMetric(value, NOW - 10, 10.0) for name, value in milli.items()}


CALC = ReplicaCalculator(tolerance=0.1, cpu_initialization_period=300.0,
                         initial_readiness_delay=30.0)


def utilization(current: int, target: int, pods: list[Obj], metrics: dict[str, PodMetric],
                resource: str = "cpu", container: str = "") -> tuple[int, int, int]:
    return CALC.utilization_replicas(current_replicas=current, target_utilization=target,
                                     resource=resource, pods=pods, metrics=metrics, now=NOW,
                                     container=container)


@pytest.mark.parametrize(("current", "target", "pods", "metrics", "expected"), [
    pytest.param(3, 30, [pod("a"), pod("b"), pod("c")], samples(a=300, b=500, c=700),
                 (5, 50, 500), id="scale-up"),
    pytest.param(5, 50, [pod(n) for n in "abcde"],
                 samples(a=100, b=300, c=500, d=250, e=250), (3, 28, 280), id="scale-down"),
    pytest.param(3, 50, [pod("a"), pod("b"), pod("c")], samples(a=520, b=540, c=560),
                 (3, 54, 540), id="within-tolerance"),
    pytest.param(4, 50, [pod(n) for n in "abcd"], samples(a=100, b=100),
                 (4, 10, 100), id="missing-pods-count-as-their-request-on-scale-down"),
    pytest.param(4, 200, [pod(n) for n in "abcd"], samples(a=200, b=200),
                 (3, 20, 200), id="missing-pods-count-as-a-target-above-100-on-scale-down"),
    pytest.param(6, 60, [pod(n) for n in "abcdef"], samples(a=1000, b=1000, c=1000),
                 (6, 100, 1000), id="missing-pods-count-as-idle-so-direction-flips"),
    pytest.param(3, 30, [pod("a", ready="False", ready_since=LONG_AGO + 5), pod("b"),
                         pod("c")], samples(a=300, b=500, c=700),
                 (4, 60, 600), id="never-ready-pod-counts-as-idle-on-scale-up"),
    pytest.param(3, 30, [pod("a", ready="False", ready_since=NOW - 100), pod("b"), pod("c")],
                 samples(a=300, b=500, c=700),
                 (5, 50, 500), id="pod-that-was-ready-before-still-counts"),
    pytest.param(3, 30, [pod("a", ready="False"), pod("b"), pod("c", ready="False")],
                 samples(a=300, b=500, c=700), (3, 50, 500), id="hot-cpu-no-scale"),
    pytest.param(5, 50, [pod("a"), pod("b"), pod("c"), pod("d", phase="Pending"),
                         pod("e", phase="Pending")],
                 samples(a=100, b=300, c=500), (2, 30, 300),
                 id="unready-pods-are-left-out-of-a-scale-down"),
    pytest.param(2, 30, [pod("a"), pod("b"), pod("c", phase="Failed"),
                         {**pod("d"), "metadata": {**pod("d")["metadata"],
                                                   "deletionTimestamp": rfc3339(NOW)}}],
                 samples(a=500, b=700, c=300, d=100), (4, 60, 600),
                 id="failed-and-deleted-pods-are-ignored"),
])
def test_cpu_utilization_replicas(current: int, target: int, pods: list[Obj],
                                  metrics: dict[str, PodMetric],
                                  expected: tuple[int, int, int]) -> None:
    assert utilization(current, target, pods, metrics) == expected


def test_cpu_sample_from_before_a_full_window_of_readiness_is_unready() -> None:
    """Within the cpu initialization period a Ready pod counts only once its sample
    covers a whole window after it became Ready."""
    started, ready_since = NOW - 60, NOW - 50
    young = pod("a", started=started, ready_since=ready_since)
    early = {"a": PodMetric(900, ready_since + 5, 10.0), "b": PodMetric(300, NOW - 5, 10.0)}
    late = {"a": PodMetric(900, ready_since + 15, 10.0), "b": PodMetric(300, NOW - 5, 10.0)}
    # early: only b counts (30 % of 60 → 0.5 → 1); a's sample is a spike of its start
    assert utilization(2, 60, [young, pod("b")], early) == (1, 30, 300)
    assert utilization(2, 60, [young, pod("b")], late) == (2, 60, 600)


def test_memory_ignores_readiness() -> None:
    pods = [pod("a", ready="False"), pod("b")]
    mib = 2**20 * 1000
    metrics = samples(a=1024 * mib, b=1024 * mib)
    assert utilization(2, 50, pods, metrics, resource="memory")[:2] == (4, 100)


def test_container_utilization_counts_only_that_containers_request() -> None:
    sidecar = (make_pod("a").label("app", "web").container("app", requests={"cpu": "500m"})
               .container("proxy", requests={"cpu": "1"}).phase("Running")
               .condition("Ready").obj())
    sidecar["status"]["startTime"] = rfc3339(LONG_AGO)
    items = [{"metadata": {"name": "a", "namespace": "default"},
              "timestamp": rfc3339(NOW - 10), "window": "10s",
              "containers": [{"name": "app", "usage": {"cpu": "500m"}},
                             {"name": "proxy", "usage": {"cpu": "10m"}}]}]
    metrics, _ = resource_metrics(items, "cpu", "app")
    assert utilization(1, 50, [sidecar], metrics, container="app") == (2, 100, 500)


def test_average_value_target() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    assert CALC.average_value_replicas(current_replicas=3, target_usage=500, resource="cpu",
                                       pods=pods, metrics=samples(a=900, b=900, c=900),
                                       now=NOW) == (6, 900)


@pytest.mark.parametrize(("pods", "metrics", "message"), [
    pytest.param([pod("a"), make_pod("b").container("c").phase("Running").obj()],
                 samples(a=100, b=100), "missing request for cpu in container c of Pod b",
                 id="missing-request"),
    pytest.param([], samples(a=100),
                 "no pods returned by selector while calculating replica count", id="no-pods"),
    pytest.param([pod("a", phase="Pending")], samples(a=100),
                 "did not receive metrics for targeted pods (pods might be unready)",
                 id="no-ready-metrics"),
])
def test_replica_calculation_errors(pods: list[Obj], metrics: dict[str, PodMetric],
                                    message: str) -> None:
    with pytest.raises(MetricsError) as err:
        utilization(2, 50, pods, metrics)
    assert err.value.message == message


def test_pod_metrics_parse() -> None:
    items = [{"metadata": {"name": "a", "namespace": "ns"}, "timestamp": rfc3339(NOW),
              "window": "15s", "containers": [{"name": "c", "usage": {"cpu": "250m"}},
                                              {"name": "d", "usage": {"cpu": "0.5"}}]},
             {"metadata": {"name": "b", "namespace": "ns"}, "timestamp": rfc3339(NOW),
              "containers": [{"name": "c", "usage": {"memory": "1Mi"}}]}]
    metrics, stamp = resource_metrics(items, "cpu")
    assert metrics == {"a": PodMetric(750, NOW, 15.0)} and stamp == NOW  # b: missing
    with pytest.raises(MetricsError, match="container x not present in metrics for pod ns/a"):
        resource_metrics(items, "cpu", "x")
    with pytest.raises(MetricsError, match="no metrics returned from resource metrics API"):
        resource_metrics([], "cpu")


# -- normalization ----------------------------------------------------------------------

def run(history: History, behavior: Obj | None, *, current: int, desired: int,
        min_replicas: int = 1, max_replicas: int = 100,
        now: float = NOW) -> tuple[int, str, str, str]:
    got = normalize(history, behavior_from_spec(behavior, downscale_stabilization=300),
                    current=current, desired=desired, min_replicas=min_replicas,
                    max_replicas=max_replicas, now=now, downscale_stabilization=300)
    return (got.replicas, got.able_to_scale[1], got.scaling_limited[0],
            got.scaling_limited[1])


def test_scale_down_waits_for_the_stabilization_window_without_behavior() -> None:
    history = History([Recommendation(8, NOW - 200)])
    assert run(history, None, current=8, desired=3) == (8, "ScaleDownStabilized", "False",
                                                        "DesiredWithinRange")
    # 101 s later the 8 is older than the 300 s window; the last recommendation (3) holds
    assert run(history, None, current=8, desired=3, now=NOW + 101)[:2] == (3, "ReadyForNewScale")


@pytest.mark.parametrize(("current", "desired", "min_max", "expected"), [
    pytest.param(1, 10, (1, 20), (4, "True", "ScaleUpLimit"), id="scale-up-limit-minimum-4"),
    pytest.param(5, 30, (1, 40), (10, "True", "ScaleUpLimit"), id="scale-up-limit-double"),
    pytest.param(3, 9, (1, 5), (5, "True", "TooManyReplicas"), id="too-many"),
    pytest.param(3, 1, (2, 5), (2, "True", "TooFewReplicas"), id="too-few"),
    pytest.param(3, 4, (1, 5), (4, "False", "DesiredWithinRange"), id="within-range"),
])
def test_min_max_and_scale_up_limit_without_behavior(
        current: int, desired: int, min_max: tuple[int, int],
        expected: tuple[int, str, str]) -> None:
    got = run(History(), None, current=current, desired=desired, min_replicas=min_max[0],
              max_replicas=min_max[1])
    assert (got[0], got[2], got[3]) == expected


@pytest.mark.parametrize(("behavior", "current", "desired", "expected"), [
    pytest.param({}, 10, 40, (20, "ScaleUpLimit"), id="default-up-max-of-100pct-and-4"),
    pytest.param({}, 2, 40, (6, "ScaleUpLimit"), id="default-up-4-pods-beat-100pct"),
    pytest.param({"scaleUp": {"selectPolicy": "Min"}}, 10, 40, (14, "ScaleUpLimit"),
                 id="select-min"),
    pytest.param({"scaleUp": {"selectPolicy": "Disabled"}}, 10, 40, (10, "ScaleUpLimit"),
                 id="scale-up-disabled"),
    pytest.param({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Percent", "value": 50, "periodSeconds": 60}]}}, 10, 1,
                 (5, "ScaleDownLimit"), id="scale-down-percent"),
    pytest.param({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 60},
        {"type": "Percent", "value": 50, "periodSeconds": 60}], "selectPolicy": "Min"}},
                 10, 1, (9, "ScaleDownLimit"), id="scale-down-min-change"),
    pytest.param({"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Disabled"}},
                 10, 1, (10, "ScaleDownLimit"), id="scale-down-disabled"),
    pytest.param({"scaleDown": {"stabilizationWindowSeconds": 0}}, 10, 0, (1, "TooFewReplicas"),
                 id="scale-down-clamped-to-min"),
    pytest.param({}, 60, 200, (100, "TooManyReplicas"), id="max-below-the-rate-limit"),
])
def test_behavior_policies(behavior: Obj, current: int, desired: int,
                           expected: tuple[int, str]) -> None:
    got = run(History(), behavior, current=current, desired=desired, max_replicas=100)
    assert (got[0], got[3]) == expected


def test_scale_up_policy_counts_what_was_added_within_its_period() -> None:
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}
    history = History(scale_up_events=[ScaleEvent(2, NOW - 30)])
    assert run(history, behavior, current=3, desired=10)[::3] == (3, "ScaleUpLimit")
    assert run(history, behavior, current=3, desired=10, now=NOW + 31)[::3] == (
        5, "ScaleUpLimit")


def test_scale_up_stabilization_window_applies_the_lowest_recent_recommendation() -> None:
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 60}}
    history = History([Recommendation(4, NOW - 30)])
    assert run(history, behavior, current=3, desired=8)[:2] == (4, "ScaleUpStabilized")


def test_behavior_scale_down_window_defaults_to_the_controller_setting() -> None:
    history = History([Recommendation(6, NOW - 299)])
    assert run(history, {"scaleUp": {}}, current=6, desired=2)[:2] == (6, "ScaleDownStabilized")
    assert run(history, {"scaleUp": {}}, current=6, desired=2, now=NOW + 2)[:2] == (
        2, "ReadyForNewScale")


def test_scale_events_reuse_a_slot_older_than_the_longest_period() -> None:
    behavior = behavior_from_spec({}, downscale_stabilization=300)
    history = History()
    history.store_scale_event(behavior, 2, 4, NOW)
    history.store_scale_event(behavior, 4, 6, NOW + 5)
    history.store_scale_event(behavior, 6, 9, NOW + 20)  # the first fell out of 15 s
    assert [(e.change, e.timestamp) for e in history.scale_up_events] == [
        (3, NOW + 20), (2, NOW + 5)]
    history.store_scale_event(None, 9, 1, NOW)  # without behavior nothing is kept
    assert history.scale_down_events == []
