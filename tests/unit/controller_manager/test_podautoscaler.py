"""The HorizontalPodAutoscaler controller on a fake clock against the in-memory API
(Kubernetes' horizontal_test.go): it rescales the target, says why in events and
conditions, writes status only when it changed, and remembers recommendations and scale
events between syncs."""

from __future__ import annotations

import copy
from typing import cast

import pytest

from skiff.api import ApiError, Reason
from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.client.fake import Action, FakeClient, conflicting, fail_with
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.podautoscaler import HorizontalController
from skiff.controller_manager.settings import ControllerManagerSettings

NS = "default"
KEY = f"{NS}/web"
CPU_ABOVE = "cpu resource utilization (percentage of request) above target"


def deployment(replicas: int, *, kind: str = "Deployment") -> Obj:
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "web", "namespace": NS, "uid": "d-1"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": replicas}}


def hpa(*, min_replicas: int = 1, max_replicas: int = 10, target: int = 50,
        metrics: list[Obj] | None = None, behavior: Obj | None = None,
        kind: str = "Deployment", api_version: str = "apps/v1") -> Obj:
    spec: Obj = {"scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": "web"},
                 "minReplicas": min_replicas, "maxReplicas": max_replicas,
                 "metrics": metrics if metrics is not None else [
                     {"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": target}}}]}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NS, "uid": "h-1", "generation": 1},
            "spec": spec}


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeClient(clock=self.clock)
        self.ctl = HorizontalController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.clock))

    def given(self, autoscaler: Obj, replicas: int, usage_milli: list[int], *,
              target_kind: str = "Deployment") -> None:
        """An HPA, its target at `replicas`, and one Running, Ready pod (request 1 cpu)
        per entry of `usage_milli` with that much cpu used."""
        self.ctl.hpas.store.put(copy.deepcopy(self.api.add(autoscaler)[0]))
        self.api.add(deployment(replicas, kind=target_kind))
        self.set_usage(usage_milli)

    def set_usage(self, usage_milli: list[int]) -> None:
        for old in self.ctl.pods.store.list():
            self.ctl.pods.store.remove(old)
        started = rfc3339(self.clock.now() - 3600)
        self.api.metrics = []
        for i, milli in enumerate(usage_milli):
            pod = (make_pod(f"web-{i}").namespace(NS).label("app", "web")
                   .container("c", requests={"cpu": "1"}).phase("Running")
                   .condition("Ready").start_time(started).obj())
            self.ctl.pods.store.put(pod)
            self.api.metrics.append({
                "metadata": {"name": f"web-{i}", "namespace": NS, "labels": {"app": "web"}},
                "timestamp": rfc3339(self.clock.now() - 5), "window": "10s",
                "containers": [{"name": "c", "usage": {"cpu": f"{milli}m"}}]})

    async def sync(self) -> float | None:
        after = await self.ctl.reconcile(KEY)
        stored = self.api.stored("horizontalpodautoscalers", "web", NS)
        if stored is not None:  # the informer sees our write
            self.ctl.hpas.store.put(copy.deepcopy(stored))
        return after

    def target(self, resource: str = "deployments") -> Obj:
        stored = self.api.stored(resource, "web", NS)
        assert stored is not None
        return stored

    @property
    def target_replicas(self) -> int:
        return int(self.target()["spec"]["replicas"])

    @property
    def status(self) -> Obj:
        return cast(Obj, (self.ctl.hpas.store.get(KEY) or {}).get("status") or {})

    @property
    def updates(self) -> list[Action]:
        """The updates of the target (the scale writes)."""
        return [a for a in self.api.calls("update") if a.resource != "events"]

    @property
    def status_updates(self) -> list[Action]:
        return self.api.calls("update_status", "horizontalpodautoscalers")

    @property
    def metrics_calls(self) -> int:
        return len(self.api.calls("pod_metrics"))

    def event_log(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"])
                for e in (a.object for a in self.api.calls("create", "events")) if e]

    def condition(self, type_: str) -> tuple[str, str, str]:
        cond = next(c for c in self.status["conditions"] if c["type"] == type_)
        return cond["status"], cond["reason"], cond["message"]


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_scale_up_rescales_the_target_and_reports_why(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])
    assert await h.sync() == 15.0  # --horizontal-pod-autoscaler-sync-period
    assert h.target_replicas == 5
    assert h.event_log() == [("Normal", "SuccessfulRescale",
                                  f"New size: 5; reason: {CPU_ABOVE}")]
    assert h.status == {
        "currentReplicas": 3, "desiredReplicas": 5, "lastScaleTime": rfc3339(h.clock.now()),
        "currentMetrics": [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": 50, "averageValue": "500m"}}}],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
             "message": "the HPA controller was able to update the target scale to 5",
             "lastTransitionTime": rfc3339(h.clock.now())},
            {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
             "message": "the HPA was able to successfully calculate a replica count from "
                        "cpu resource utilization (percentage of request)",
             "lastTransitionTime": rfc3339(h.clock.now())},
            {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange",
             "message": "the desired count is within the acceptable range",
             "lastTransitionTime": rfc3339(h.clock.now())}]}


async def test_within_tolerance_nothing_changes_and_status_is_written_once(h: Harness) -> None:
    h.given(hpa(target=50), 3, [520, 540, 560])
    await h.sync()
    assert h.updates == [] and h.event_log() == []
    assert (h.status["currentReplicas"], h.status["desiredReplicas"]) == (3, 3)
    assert h.condition("AbleToScale") == ("True", "ReadyForNewScale",
                                          "recommended size matches current size")
    assert "lastScaleTime" not in h.status
    h.clock.advance(15)
    await h.sync()
    assert len(h.status_updates) == 1  # unchanged: not written again


async def test_scale_down_waits_for_the_stabilization_window(h: Harness) -> None:
    h.given(hpa(target=50), 4, [500, 500, 500, 500])
    await h.sync()
    h.set_usage([100, 100, 100, 100])
    h.clock.advance(15)
    await h.sync()
    assert h.target_replicas == 4
    assert h.condition("AbleToScale") == (
        "True", "ScaleDownStabilized", "recent recommendations were higher than current one, "
        "applying the highest recent recommendation")
    assert h.status["desiredReplicas"] == 4
    h.clock.advance(286)  # the 4s recommended first fall out of the 300 s window
    await h.sync()
    assert h.target_replicas == 1
    assert h.event_log()[-1] == ("Normal", "SuccessfulRescale",
                                     "New size: 1; reason: All metrics below target")


async def test_scale_up_is_limited_by_the_behavior_policy(h: Harness) -> None:
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    h.given(hpa(target=50, behavior=behavior), 2, [1000, 1000])
    await h.sync()
    assert h.target_replicas == 3
    assert h.condition("ScalingLimited") == (
        "True", "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate")
    h.target()["status"]["replicas"] = 3
    h.set_usage([1000, 1000, 1000])
    h.clock.advance(30)
    await h.sync()
    assert h.target_replicas == 3  # one pod per 60 s: already used
    h.clock.advance(30)
    await h.sync()
    assert h.target_replicas == 4


async def test_max_replicas_limits_a_scale_up(h: Harness) -> None:
    h.given(hpa(target=10, max_replicas=4), 3, [900, 900, 900])
    await h.sync()
    assert h.target_replicas == 4
    assert h.condition("ScalingLimited") == (
        "True", "TooManyReplicas",
        "the desired replica count is more than the maximum replica count")


async def test_min_replicas_limits_a_scale_down(h: Harness) -> None:
    h.given(hpa(target=50, min_replicas=2,
                behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}), 4, [10] * 4)
    await h.sync()
    assert h.target_replicas == 2
    assert h.condition("ScalingLimited")[:2] == ("True", "TooFewReplicas")


@pytest.mark.parametrize(("replicas", "min_max", "expected", "reason"), [
    pytest.param(12, (1, 10), 10, "Current number of replicas above Spec.MaxReplicas",
                 id="above-max"),
    pytest.param(1, (3, 10), 3, "Current number of replicas below Spec.MinReplicas",
                 id="below-min"),
])
async def test_target_outside_min_max_is_brought_back_without_metrics(
        h: Harness, replicas: int, min_max: tuple[int, int], expected: int,
        reason: str) -> None:
    h.given(hpa(min_replicas=min_max[0], max_replicas=min_max[1]), replicas, [500])
    await h.sync()
    assert h.target_replicas == expected and h.metrics_calls == 0
    assert h.event_log() == [("Normal", "SuccessfulRescale",
                                  f"New size: {expected}; reason: {reason}")]


async def test_target_at_zero_replicas_disables_scaling(h: Harness) -> None:
    h.given(hpa(), 0, [900])
    await h.sync()
    assert h.updates == [] and h.metrics_calls == 0
    assert h.condition("ScalingActive") == (
        "False", "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero")
    assert (h.status["currentReplicas"], h.status["desiredReplicas"]) == (0, 0)


async def test_unavailable_metrics_stop_scaling_and_keep_the_desired_count(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])
    await h.sync()
    h.target()["spec"]["replicas"] = 5
    h.api.prepend_reactor("pod_metrics", "pods", fail_with(
        ApiError(Reason.SERVICE_UNAVAILABLE, "no kubelet answered")))
    h.clock.advance(15)
    await h.sync()
    inner = ("failed to get cpu utilization: unable to get metrics for resource cpu: unable "
             "to fetch metrics from resource metrics API: no kubelet answered")
    assert h.event_log()[1:] == [
        ("Warning", "FailedGetResourceMetric", inner),
        ("Warning", "FailedComputeMetricsReplicas", "invalid metrics (1 invalid out of 1), "
         f"first error is: failed to get cpu resource metric value: {inner}")]
    assert h.condition("ScalingActive") == (
        "False", "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: {inner}")
    assert (h.status["currentReplicas"], h.status["desiredReplicas"]) == (5, 5)
    assert "currentMetrics" not in h.status and h.target_replicas == 5


async def test_missing_request_is_reported_with_the_container_and_pod(h: Harness) -> None:
    h.given(hpa(), 1, [500])
    h.ctl.pods.store.put(make_pod("web-9").namespace(NS).label("app", "web").container("side")
                         .phase("Running").obj())
    await h.sync()
    status, reason, message = h.condition("ScalingActive")
    assert (status, reason) == ("False", "FailedGetResourceMetric")
    assert message.endswith("missing request for cpu in container side of Pod web-9")


@pytest.mark.parametrize(("kind", "api_version", "message"), [
    # served, but without a scale subresource: kube-apiserver's 404 on daemonsets/scale
    ("DaemonSet", "apps/v1", "the server could not find the requested resource"),
    ("Widget", "example.com/v1", 'no matches for kind "Widget" in group "example.com"'),
])
async def test_unsupported_target_kind_is_failed_get_scale(
        h: Harness, kind: str, api_version: str, message: str) -> None:
    h.given(hpa(kind=kind, api_version=api_version), 3, [500])
    await h.sync()
    assert h.event_log() == [("Warning", "FailedGetScale", message)]
    assert h.condition("AbleToScale") == (
        "False", "FailedGetScale",
        f"the HPA controller was unable to get the target's current scale: {message}")


async def test_statefulset_target_is_scaled(h: Harness) -> None:
    h.given(hpa(kind="StatefulSet", target=30), 3, [300, 500, 700], target_kind="StatefulSet")
    await h.sync()
    assert h.target("statefulsets")["spec"]["replicas"] == 5


async def test_WL1_replication_controller_target_is_scaled_by_its_label_map(h: Harness) -> None:
    """A ReplicationController's selector is a plain label map, not a LabelSelector."""
    h.given(hpa(kind="ReplicationController", api_version="v1", target=30), 3,
            [300, 500, 700], target_kind="Deployment")
    h.api.add({"apiVersion": "v1", "kind": "ReplicationController",
               "metadata": {"name": "web", "namespace": NS, "uid": "rc-1"},
               "spec": {"replicas": 3, "selector": {"app": "web"}},
               "status": {"replicas": 3}})
    await h.sync()
    assert h.target("replicationcontrollers")["spec"]["replicas"] == 5
    assert h.status["currentReplicas"] == 3


async def test_pods_metric_without_custom_metrics_api_does_not_block_a_scale_up(
        h: Harness) -> None:
    pods_metric = {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
        "type": "AverageValue", "averageValue": "10"}}}
    cpu = hpa(target=30)["spec"]["metrics"][0]
    h.given(hpa(metrics=[pods_metric, cpu]), 3, [300, 500, 700])
    await h.sync()
    assert h.target_replicas == 5
    assert h.event_log()[0] == (
        "Warning", "FailedGetPodsMetric",
        "unable to get metric qps: unable to fetch metrics from custom metrics API: no custom "
        "metrics API (custom.metrics.k8s.io) registered")
    assert h.condition("ScalingActive")[:2] == ("True", "ValidMetricFound")


async def test_a_failed_metric_blocks_a_scale_down(h: Harness) -> None:
    external = {"type": "External", "external": {"metric": {"name": "queue"}, "target": {
        "type": "Value", "value": "10"}}}
    cpu = hpa(target=50)["spec"]["metrics"][0]
    h.given(hpa(metrics=[cpu, external], behavior={}), 4, [10, 10, 10, 10])
    await h.sync()
    assert h.target_replicas == 4
    assert h.condition("ScalingActive")[:2] == ("False", "FailedGetExternalMetric")


async def test_conflicting_target_update_is_retried(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])
    h.api.prepend_reactor("update", "deployments", conflicting(h.api, times=2))
    await h.sync()
    assert h.target_replicas == 5 and len(h.updates) == 3  # two conflicts, then written


async def test_failed_rescale_is_reported(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])

    h.api.prepend_reactor("update", "*", fail_with(ApiError(Reason.FORBIDDEN, "not allowed")))
    await h.sync()
    assert h.event_log() == [("Warning", "FailedRescale",
                                  f"New size: 5; reason: {CPU_ABOVE}; error: not allowed")]
    assert h.condition("AbleToScale") == (
        "False", "FailedUpdateScale",
        "the HPA controller was unable to update the target scale: not allowed")
    assert "lastScaleTime" not in h.status


async def test_condition_transition_time_moves_only_when_its_status_does(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])
    await h.sync()
    first = rfc3339(h.clock.now())
    h.target()["spec"]["replicas"] = 5
    h.set_usage([100] * 5)
    h.clock.advance(15)
    await h.sync()
    able = next(c for c in h.status["conditions"] if c["type"] == "AbleToScale")
    assert able["reason"] == "ScaleDownStabilized" and able["lastTransitionTime"] == first


async def test_ambiguous_selector_stops_both_autoscalers(h: Harness) -> None:
    h.given(hpa(target=30), 3, [300, 500, 700])
    other = hpa(target=30)
    other["metadata"] = {**other["metadata"], "name": "web-2", "uid": "h-2"}
    h.ctl.hpas.store.put(other)
    await h.ctl.reconcile(f"{NS}/web-2")
    await h.sync()
    assert h.condition("ScalingActive") == (
        "False", "AmbiguousSelector", "pods by selector app=web are controlled by multiple "
        f"HPAs: [{NS}/web {NS}/web-2]")


async def test_deleted_autoscaler_forgets_its_history(h: Harness) -> None:
    h.given(hpa(), 3, [500, 500, 500])
    await h.sync()
    assert KEY in h.ctl.histories
    h.ctl.hpas.store.remove(h.ctl.hpas.store.get(KEY) or {})
    assert await h.ctl.reconcile(KEY) is None
    assert KEY not in h.ctl.histories and KEY not in h.ctl.selectors


async def test_only_spec_changes_enqueue_before_the_next_period(h: Harness) -> None:
    old = hpa()
    h.ctl.hpas._notify_update(old, {**old, "status": {"currentReplicas": 3}})
    assert len(h.ctl.queue) == 0
    h.ctl.hpas._notify_update(old, hpa(max_replicas=20))
    assert len(h.ctl.queue) == 1
