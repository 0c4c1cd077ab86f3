"""SPEC EX4 in the HorizontalPodAutoscaler, on the in-memory client: a custom resource whose
CRD has a scale subresource is a scale target as a Deployment is. Its replicas and selector
are read at the CRD's paths (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`)
and the desired count is written at `specReplicasPath`; a custom kind without the
subresource is FailedGetScale with kube-apiserver's 404 message."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import cast

import pytest

from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import register_custom, unregister_custom
from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.client.fake import FakeClient, conflicting
from skiff.client.scale import ScaleError, ScalePaths, ScaleTarget, resolve, scale_of
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.podautoscaler import HorizontalController
from skiff.controller_manager.settings import ControllerManagerSettings

GROUP = "stable.example.com"
REF = f"crontabs.{GROUP}"
NS = "default"
KEY = f"{NS}/web"
SCALE = {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
         "labelSelectorPath": ".status.labelSelector"}
BELOW_MIN = "Current number of replicas below Spec.MinReplicas"


def crd(*, scale: Obj | None = None) -> Obj:
    subresources: Obj = {"status": {}}
    if scale is not None:
        subresources["scale"] = scale
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": REF, "uid": "crd-uid"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": subresources,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}}


def crontab(size: int, *, selector: str | None = "app=web") -> Obj:
    status: Obj = {"size": size}
    if selector is not None:
        status["labelSelector"] = selector
    return {"apiVersion": f"{GROUP}/v1", "kind": "CronTab",
            "metadata": {"name": "web", "namespace": NS, "uid": "ct-1"},
            "spec": {"size": size, "cronSpec": "* * * * */5"}, "status": status}


def hpa(*, min_replicas: int = 1, max_replicas: int = 10) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NS, "uid": "h-1", "generation": 1},
            "spec": {"scaleTargetRef": {"apiVersion": f"{GROUP}/v1", "kind": "CronTab",
                                        "name": "web"},
                     "minReplicas": min_replicas, "maxReplicas": max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 30}}}]}}


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeClient(clock=self.clock)
        self.ctl = HorizontalController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.clock))

    def serve(self, definition: Obj) -> None:
        """The CRD is established: the kind is served and the CRD informer has it."""
        register_custom(*kind_infos(definition))
        self.ctl.crds.store.put(copy.deepcopy(definition))

    def given(self, autoscaler: Obj, target: Obj | None, usage_milli: list[int]) -> None:
        self.ctl.hpas.store.put(copy.deepcopy(self.api.add(autoscaler)[0]))
        if target is not None:
            self.api.add(target)
        started = rfc3339(self.clock.now() - 3600)
        for i, milli in enumerate(usage_milli):
            self.ctl.pods.store.put(
                make_pod(f"web-{i}").namespace(NS).label("app", "web")
                .container("c", requests={"cpu": "1"}).phase("Running")
                .condition("Ready").start_time(started).obj())
            self.api.metrics.append({
                "metadata": {"name": f"web-{i}", "namespace": NS, "labels": {"app": "web"}},
                "timestamp": rfc3339(self.clock.now() - 5), "window": "10s",
                "containers": [{"name": "c", "usage": {"cpu": f"{milli}m"}}]})

    async def sync(self) -> None:
        await self.ctl.reconcile(KEY)
        stored = self.api.stored("horizontalpodautoscalers", "web", NS)
        if stored is not None:
            self.ctl.hpas.store.put(copy.deepcopy(stored))

    def target(self) -> Obj:
        stored = self.api.stored(REF, "web", NS)
        assert stored is not None
        return stored

    @property
    def status(self) -> Obj:
        return cast(Obj, (self.ctl.hpas.store.get(KEY) or {}).get("status") or {})

    def event_log(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"])
                for e in (a.object for a in self.api.calls("create", "events")) if e]

    def condition(self, type_: str) -> tuple[str, str, str]:
        cond = next(c for c in self.status["conditions"] if c["type"] == type_)
        return cond["status"], cond["reason"], cond["message"]


@pytest.fixture
def h() -> Iterator[Harness]:
    yield Harness()
    unregister_custom(REF)


async def test_ex4_custom_target_below_min_replicas_is_raised_at_its_spec_replicas_path(
        h: Harness) -> None:
    h.serve(crd(scale=SCALE))
    h.given(hpa(min_replicas=3), crontab(1), [])
    await h.sync()
    target = h.target()
    assert target["spec"] == {"size": 3, "cronSpec": "* * * * */5"}
    assert "replicas" not in target["spec"]
    assert h.event_log() == [("Normal", "SuccessfulRescale",
                              f"New size: 3; reason: {BELOW_MIN}")]
    assert (h.status["currentReplicas"], h.status["desiredReplicas"]) == (1, 3)
    assert h.condition("AbleToScale") == (
        "True", "SucceededRescale",
        "the HPA controller was able to update the target scale to 3")


async def test_ex4_custom_target_follows_metrics_through_its_label_selector_path(
        h: Harness) -> None:
    h.serve(crd(scale=SCALE))
    h.given(hpa(), crontab(3), [300, 500, 700])
    await h.sync()
    assert h.target()["spec"]["size"] == 5
    assert h.condition("ScalingActive")[:2] == ("True", "ValidMetricFound")
    assert h.status["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 50


async def test_ex4_custom_target_update_conflict_is_retried(h: Harness) -> None:
    h.serve(crd(scale=SCALE))
    h.given(hpa(min_replicas=3), crontab(1), [])
    h.api.prepend_reactor("update", "crontabs", conflicting(h.api, times=2))
    await h.sync()
    assert h.target()["spec"]["size"] == 3
    assert [r for _, r, _ in h.event_log()] == ["SuccessfulRescale"]


async def test_ex4_custom_kind_without_scale_subresource_is_failed_get_scale(
        h: Harness) -> None:
    h.serve(crd(scale=None))
    h.given(hpa(min_replicas=3), crontab(1), [])
    await h.sync()
    message = "the server could not find the requested resource"
    assert h.event_log() == [("Warning", "FailedGetScale", message)]
    assert h.condition("AbleToScale") == (
        "False", "FailedGetScale",
        f"the HPA controller was unable to get the target's current scale: {message}")
    assert h.target()["spec"]["size"] == 1


async def test_ex4_missing_custom_target_names_its_group_resource(h: Harness) -> None:
    h.serve(crd(scale=SCALE))
    h.given(hpa(), None, [])
    await h.sync()
    assert h.event_log() == [("Warning", "FailedGetScale",
                              f'{REF} "web" not found')]


@pytest.mark.parametrize(("selector", "event", "message"), [
    (None, "SelectorRequired", "the HPA target's scale is missing a selector"),
    ("app in (web", "InvalidSelector",
     "couldn't convert selector into a corresponding internal selector object: "),
])
async def test_ex4_custom_target_without_a_usable_selector_stops_scaling(
        h: Harness, selector: str | None, event: str, message: str) -> None:
    h.serve(crd(scale=SCALE))
    h.given(hpa(), crontab(3, selector=selector), [900, 900, 900])
    await h.sync()
    assert [r for _, r, _ in h.event_log()] == [event]
    status, reason, text = h.condition("ScalingActive")
    assert (status, reason) == ("False", "InvalidSelector") and text.startswith(message)
    assert h.target()["spec"]["size"] == 3


def test_ex4_scale_of_a_custom_object_reads_zero_where_its_paths_are_unset() -> None:
    definition = crd(scale=SCALE)
    info = kind_infos(definition)[0]
    target = ScaleTarget(info, ScalePaths(".spec.size", ".status.size",
                                          ".status.labelSelector"))
    scale = scale_of(target, {"metadata": {"name": "x"}, "spec": {"size": True}})
    assert (scale.spec_replicas, scale.status_replicas, scale.selector) == (0, 0, "")


def test_ex4_resolve_reads_the_stored_versions_scale_paths(h: Harness) -> None:
    h.serve(crd(scale={"specReplicasPath": ".spec.size",
                       "statusReplicasPath": ".status.size"}))
    definitions = {REF: crd(scale={"specReplicasPath": ".spec.size",
                                   "statusReplicasPath": ".status.size"})}
    target = resolve(api_version=f"{GROUP}/v1", kind="CronTab", crd_of=definitions.get)
    assert target.paths == ScalePaths(".spec.size", ".status.size", "")
    assert target.group_resource == REF
    with pytest.raises(ScaleError, match="the server could not find the requested resource"):
        resolve(api_version=f"{GROUP}/v1", kind="CronTab", crd_of=lambda _name: None)
    with pytest.raises(ScaleError, match="unexpected GroupVersion string: a/b/c"):
        resolve(api_version="a/b/c", kind="CronTab", crd_of=definitions.get)
    assert resolve(api_version="v1", kind="ReplicationController",
                   crd_of=definitions.get).group_resource == "replicationcontrollers"
