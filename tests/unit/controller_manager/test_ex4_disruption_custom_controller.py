"""SPEC EX4 in the disruption controller, on the in-memory client: pods whose controller is a
custom resource with a scale subresource count that controller's replicas (read at its CRD's
`specReplicasPath`) when a PodDisruptionBudget is relative, as kube's `getScaleController`
reads `<resource>/scale`; a controller kind without the subresource is reported."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import register_custom, unregister_custom
from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.disruption import DisruptionController
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.settings import ControllerManagerSettings

GROUP = "stable.example.com"
REF = f"crontabs.{GROUP}"
NS = "default"


def crd(*, scale: bool) -> Obj:
    subresources: Obj = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.size",
                                 "statusReplicasPath": ".status.size"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": REF, "uid": "crd-uid"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": subresources,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}}


class Harness:
    def __init__(self, *, scale: bool) -> None:
        self.api = FakeClient(clock=FakeClock())
        self.ctl = DisruptionController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.api.clock))
        definition = crd(scale=scale)
        register_custom(*kind_infos(definition))
        self.ctl.crds.store.put(copy.deepcopy(definition))

    def given(self, *, size: int, ready: int, uid: str = "ct-uid") -> None:
        """A CronTab of `size` and `ready` Ready pods it controls, under a PDB with
        maxUnavailable 1."""
        self.api.add({"apiVersion": f"{GROUP}/v1", "kind": "CronTab",
                      "metadata": {"name": "web", "namespace": NS, "uid": "ct-uid"},
                      "spec": {"size": size}})
        for i in range(ready):
            self.ctl.pods.store.put(
                make_pod(f"web-{i}").namespace(NS).label("app", "web")
                .owner("CronTab", "web", uid=uid, api_version=f"{GROUP}/v1")
                .phase("Running").condition("Ready").obj())
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "budget", "namespace": NS, "uid": "pdb-1",
                            "generation": 1},
               "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}}
        self.ctl.pdbs.store.put(copy.deepcopy(self.api.add(pdb)[0]))

    async def status(self) -> Obj:
        await self.ctl.reconcile(f"{NS}/budget")
        stored = self.api.stored("poddisruptionbudgets", "budget", NS)
        assert stored is not None
        return dict(stored.get("status") or {})

    def event_log(self) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"])
                for e in (a.object for a in self.api.calls("create", "events")) if e]


@pytest.fixture
def scalable() -> Iterator[Harness]:
    yield Harness(scale=True)
    unregister_custom(REF)


@pytest.fixture
def unscalable() -> Iterator[Harness]:
    yield Harness(scale=False)
    unregister_custom(REF)


async def test_ex4_pdb_expects_the_replicas_of_a_custom_controller(
        scalable: Harness) -> None:
    scalable.given(size=4, ready=3)
    status = await scalable.status()
    # 4 expected (the CronTab's .spec.size), 3 desired, 3 healthy: nothing may go
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"],
            status["disruptionsAllowed"]) == (4, 3, 3, 0)
    assert scalable.event_log() == []


async def test_ex4_pdb_counts_a_custom_controller_once_over_its_pods(
        scalable: Harness) -> None:
    scalable.given(size=3, ready=3)
    status = await scalable.status()
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (3, 1)


async def test_ex4_another_object_of_the_controllers_name_is_no_controller(
        scalable: Harness) -> None:
    scalable.given(size=3, ready=1, uid="someone-else")
    status = await scalable.status()
    assert status["disruptionsAllowed"] == 0
    assert scalable.event_log() == [(
        "CalculateExpectedPodCountFailed",
        'Failed to calculate the number of expected pods: found no controllers for pod '
        '"web-0"')]


async def test_ex4_custom_controller_without_scale_subresource_is_reported(
        unscalable: Harness) -> None:
    unscalable.given(size=3, ready=3)
    status = await unscalable.status()
    assert status["disruptionsAllowed"] == 0
    assert unscalable.event_log() == [(
        "CalculateExpectedPodCountFailed",
        f"Failed to calculate the number of expected pods: {REF} does not implement the "
        "scale subresource")]
    condition = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    assert (condition["status"], condition["reason"]) == ("False", "SyncFailed")
