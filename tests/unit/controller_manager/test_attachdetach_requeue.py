"""SPEC SC1/FN3: what the attach/detach controller re-queues. A Fence that goes
away re-queues the volumes the node's pods use — not only attachments the node still holds
— and the periodic resync re-queues every exclusive volume, so no event is load-bearing."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.controller_manager.attachdetach import AttachDetachController
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.settings import ControllerManagerSettings


def claim(name: str, uid: str, mode: str = "ReadWriteOnce") -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"accessModes": [mode]}}


def pod(name: str, node: str, claim_name: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
            "spec": {"nodeName": node, "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


@pytest.fixture
def controller() -> AttachDetachController:
    client = FakeClient()
    context = ControllerContext(client=client, informers=SharedInformers(client),
                                settings=ControllerManagerSettings(), clock=FakeClock())
    ctl = AttachDetachController(context=context)
    for c in (claim("a", "1"), claim("b", "2"), claim("shared", "3", "ReadWriteMany")):
        ctl.claims.store.put(c)
    for p in (pod("on-1", "node-1", "a"), pod("on-2", "node-2", "b")):
        ctl.pods.store.put(p)
    return ctl


async def drain(ctl: AttachDetachController) -> set[str]:
    keys = set()
    while len(ctl.queue):
        key = await ctl.queue.get()
        ctl.queue.done(key)
        keys.add(key)
    return keys


async def test_sc1_fn3_deleted_fence_requeues_the_volumes_of_the_nodes_pods(
        controller: AttachDetachController) -> None:
    fence = {"metadata": {"name": "node-1"}, "spec": {"nodeName": "node-1"},
             "status": {"phase": "Unfencing"}}
    controller.fences.store.put(fence)
    controller.fences.store.remove(fence)
    controller.fences._notify_delete(fence)  # what the informer does on DELETED
    assert await drain(controller) == {"pvc-1"}  # node-1 holds no attachment any more


async def test_sc1_resync_requeues_every_exclusive_volume(
        controller: AttachDetachController) -> None:
    assert controller.resync_period == 60.0  # --attach-detach-reconcile-sync-period
    controller.resync()
    assert await drain(controller) == {"pvc-1", "pvc-2"}
