"""SPEC EX4 with real processes: the HorizontalPodAutoscaler scales a custom resource through
its CRD's scale subresource, as kube's HPA does through the polymorphic scale client. A real
apiserver (with its HTTP front, for the real kubectl) serves the CRD; a real
controller-manager runs the HPA controller, which learns the kind and its scale paths from
the CRD; its disruption controller counts a custom controller's scale for a
PodDisruptionBudget."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from skiff.api import ApiError
from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import register_custom, unregister_custom
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.client.customkinds import established
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import start_controller_manager
from tests.integration.kubectl import http_front, kubectl

pytestmark = pytest.mark.integration

BELOW_MIN = "Current number of replicas below Spec.MinReplicas"
NO_SCALE = "the server could not find the requested resource"
SCHEMA: Obj = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                              "cronSpec": {"type": "string"}}},
    "status": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                "selector": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """A cluster of this module's own with the HTTP front, and a kubeconfig for it."""
    with http_front(tmp_path_factory.mktemp("ex4-hpa")) as (cluster, _, config):
        yield cluster, config


@pytest.fixture
async def api(front: tuple[Cluster, Path]) -> AsyncIterator[ApiClient]:
    async with ApiClient(front[0].api_target, retry_seconds=20) as client:
        yield client


@pytest.fixture(scope="module")
def controller_manager(front: tuple[Cluster, Path]) -> Iterator[Process]:
    """The HPA (syncing every second) and disruption controllers."""
    started: list[Process] = []
    proc = start_controller_manager(
        front[0], started, "--controllers", "horizontalpodautoscaling,disruption",
        "--horizontal-pod-autoscaler-sync-period", "1s")
    yield proc
    for each in started:
        each.stop()
        front[0].services.pop(each.name, None)


def _crd(group: str, plural: str, kind: str, subresources: Obj) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": subresources,
                                   "schema": {"openAPIV3Schema": SCHEMA}}]}}


async def _until(check: Callable[[], Awaitable[bool]], what: str, *,
                 timeout: float = 10.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def _serve(api: ApiClient, crd: Obj) -> str:
    """Create a CRD and wait until it is established; this process learns the kind (to
    create its objects) as the controller-manager does."""
    created = await api.create(crd)
    name = str(created["metadata"]["name"])

    async def is_established() -> bool:
        nonlocal created
        created = await api.get("customresourcedefinitions", name)
        return established(created)

    await _until(is_established, f"CRD {name} to be established")
    register_custom(*kind_infos(created))
    return name


def _hpa(name: str, api_version: str, kind: str) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": kind,
                                        "name": name},
                     "minReplicas": 3, "maxReplicas": 5,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}]}}


async def _events(api: ApiClient, namespace: str, name: str) -> list[tuple[str, str]]:
    listed = await api.list("events", namespace,
                            field_selector=f"involvedObject.name={name}")
    return [(str(e.get("reason")), str(e.get("message"))) for e in listed["items"]]


async def test_ex4_hpa_raises_a_custom_resource_to_min_replicas_through_its_scale(
        api: ApiClient, front: tuple[Cluster, Path], controller_manager: Process) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    scalable = await _serve(api, _crd(group, "crontabs", "CronTab", {
        "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                "statusReplicasPath": ".status.replicas",
                                "labelSelectorPath": ".status.selector"}}))
    plain = await _serve(api, _crd(group, "widgets", "Widget", {"status": {}}))
    try:
        crontab = await api.create({
            "apiVersion": f"{group}/v1", "kind": "CronTab",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"replicas": 1, "cronSpec": "* * * * */5"}})
        crontab["status"] = {"replicas": 1, "selector": "app=web"}
        await api.update_status(crontab)
        await api.create({"apiVersion": f"{group}/v1", "kind": "Widget",
                          "metadata": {"name": "gadget", "namespace": namespace},
                          "spec": {"replicas": 1}})
        await api.create(_hpa("web", f"{group}/v1", "CronTab"), namespace=namespace)
        await api.create(_hpa("gadget", f"{group}/v1", "Widget"), namespace=namespace)

        async def rescaled() -> bool:
            obj = await api.get(scalable, "web", namespace)
            return bool(obj["spec"].get("replicas") == 3)

        await _until(rescaled, "the HPA to raise the CronTab to minReplicas 3", timeout=15)
        obj = await api.get(scalable, "web", namespace)
        assert obj["spec"]["cronSpec"] == "* * * * */5"  # only the replicas were written

        async def rescale_recorded() -> bool:  # Events are written after the scale, batched
            return ("SuccessfulRescale", f"New size: 3; reason: {BELOW_MIN}") in await _events(
                api, namespace, "web")

        await _until(rescale_recorded, "the SuccessfulRescale Event")

        async def failed_get_scale() -> bool:
            return ("FailedGetScale", NO_SCALE) in await _events(api, namespace, "gadget")

        await _until(failed_get_scale, "FailedGetScale on the Widget's HPA")
        widget = await api.get(plain, "gadget", namespace)
        assert widget["spec"]["replicas"] == 1

        shown = kubectl(front[1], "get", "hpa", "web", "-n", namespace)
        assert shown.returncode == 0, shown.stderr
        header, row = shown.stdout.splitlines()[:2]
        assert header.split()[:2] == ["NAME", "REFERENCE"]
        assert row.split()[:2] == ["web", "CronTab/web"]
        assert "3" in row.split()[3:6]  # MINPODS
    finally:
        for name in (scalable, plain):
            with contextlib.suppress(ApiError):
                await api.delete("customresourcedefinitions", name)
            unregister_custom(name)


async def test_ex4_pdb_expects_the_replicas_of_a_pods_custom_controller(
        api: ApiClient, controller_manager: Process) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    ref = await _serve(api, _crd(group, "crontabs", "CronTab", {
        "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                "statusReplicasPath": ".status.replicas"}}))
    try:
        owner = await api.create({
            "apiVersion": f"{group}/v1", "kind": "CronTab",
            "metadata": {"name": "db", "namespace": namespace}, "spec": {"replicas": 4}})
        for i in range(3):
            created = await api.create({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"db-{i}", "namespace": namespace,
                             "labels": {"app": "db"},
                             "ownerReferences": [{
                                 "apiVersion": owner["apiVersion"], "kind": "CronTab",
                                 "name": "db", "uid": owner["metadata"]["uid"],
                                 "controller": True}]},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
            created["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}
            await api.update_status(created)
        await api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": "budget", "namespace": namespace},
                          "spec": {"selector": {"matchLabels": {"app": "db"}},
                                   "maxUnavailable": 1}})
        want = {"expectedPods": 4, "desiredHealthy": 3, "currentHealthy": 3,
                "disruptionsAllowed": 0}

        async def counted() -> bool:
            pdb = await api.get("poddisruptionbudgets", "budget", namespace)
            status = pdb.get("status") or {}
            return all(status.get(k) == v for k, v in want.items())

        # 4 expected from the CronTab's scale (3 pods exist), so none may be evicted
        await _until(counted, f"the budget's status to be {want}")
    finally:
        with contextlib.suppress(ApiError):
            await api.delete("customresourcedefinitions", ref)
        unregister_custom(ref)
