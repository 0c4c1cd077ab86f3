"""SPEC SC1 with real processes: a ReadWriteOnce volume is attached to one node at a time
(the VolumeAttachment's create is the compare-and-swap), and detached only once the old pod
object is gone or its node is confirmed fenced. The test plays the kubelets and the fence
agent; only the attach/detach and binder controllers run, so nothing else deletes pods."""

from __future__ import annotations

import asyncio

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.fencing_helpers import agent_sets_phase, remove_fence
from tests.integration.controller_manager.kubelet_double import (
    KubeletDouble,
    events,
    get_or_none,
    recorded,
    wait_for,
)


def _pod(name: str, namespace: str, claim: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "m", "image": "busybox",
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data",
                                  "persistentVolumeClaim": {"claimName": claim}}]}}


async def _attached_to(api: ApiClient, volume: str, node: str) -> Obj | None:
    va = await get_or_none(api, "volumeattachments", volume)
    if va and va["spec"]["nodeName"] == node and (va.get("status") or {}).get("attached"):
        return va
    return None


async def test_sc1_attachment_is_exclusive_and_detached_only_after_the_old_pod_is_gone_or_its_node_fenced(  # noqa: E501
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "attachdetach,persistentvolume-binder")
    async with KubeletDouble(api, f"a-{namespace}") as a, \
            KubeletDouble(api, f"b-{namespace}") as b, \
            KubeletDouble(api, f"c-{namespace}") as c:
        claim = await api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"name": "data", "namespace": namespace},
                                  "spec": {"accessModes": ["ReadWriteOnce"]}})
        volume = f"pvc-{claim['metadata']['uid']}"

        async def bound() -> bool:
            pvc = await api.get("persistentvolumeclaims", "data", namespace)
            return bool(pvc["status"].get("phase") == "Bound"
                        and pvc["spec"].get("volumeName") == volume)

        await wait_for(bound, timeout=10, what="the claim to be Bound to its volume")

        # First pod on a: the volume is attached to a.
        await api.create(_pod("first", namespace, "data"))
        await a.run_pod(namespace, "first")
        va = await wait_for(lambda: _attached_to(api, volume, a.name), timeout=10,
                            what="the volume attached to a")
        assert va["spec"] == {"attacher": "skiff.io/local", "nodeName": a.name,
                              "source": {"persistentVolumeName": volume}}
        # The Event is written just after the attachment; wait for it rather than race it.
        await wait_for(lambda: events(api, namespace, reason="SuccessfulAttachVolume",
                                      name="first"),
                       timeout=10, what="a SuccessfulAttachVolume Event on the first pod")

        # Second pod on b: Multi-Attach, the attachment is not touched.
        await api.create(_pod("second", namespace, "data"))
        await b.run_pod(namespace, "second")
        [multi] = await wait_for(
            lambda: events(api, namespace, reason="FailedAttachVolume", name="second"),
            timeout=10, what="a Multi-Attach Event on the second pod")
        assert multi["message"] == (
            f'Multi-Attach error for volume "{volume}" Volume is already exclusively attached '
            "to one node and can't be attached to another")

        # The first pod terminating (processes maybe still running) keeps it on a.
        await api.delete("pods", "first", namespace)
        await asyncio.sleep(1.5)
        assert (await api.get("volumeattachments", volume))["metadata"]["uid"] == \
            va["metadata"]["uid"]

        # Gone from the API: detach from a, attach to b.
        await a.finish_termination(namespace, "first")
        moved = await wait_for(lambda: _attached_to(api, volume, b.name), timeout=10,
                               what="the volume attached to b")
        assert moved["metadata"]["uid"] != va["metadata"]["uid"]
        assert await recorded(api, namespace, reason="SuccessfulDetachVolume", name="data")

        # b partitioned with "second" still on it: a third pod on c waits while b's fence
        # is only being applied, and gets the volume once the fence is confirmed.
        await api.create(_pod("third", namespace, "data"))
        await c.run_pod(namespace, "third")
        await api.create({"apiVersion": "skiff.io/v1", "kind": "Fence",
                          "metadata": {"name": b.name},
                          "spec": {"nodeName": b.name, "agent": "storage",
                                   "reason": "test", "requestedBy": "test"}})
        try:
            await agent_sets_phase(api, b.name, "Fencing")
            await asyncio.sleep(1.5)
            assert await _attached_to(api, volume, b.name), "detached before the confirmation"
            await agent_sets_phase(api, b.name, "Fenced")
            await wait_for(lambda: _attached_to(api, volume, c.name), timeout=10,
                           what="the volume attached to c after b was fenced")
            assert await get_or_none(api, "pods", "second", namespace), \
                "the fence, not a deletion, released it"
        finally:
            await remove_fence(api, b.name)


async def test_sc1_statefulset_identity_keeps_its_claim_across_replacement(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "statefulset,attachdetach,persistentvolume-binder")
    async with KubeletDouble(api, f"a-{namespace}") as a:
        await api.create({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {"replicas": 1, "serviceName": "db",
                     "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "m", "image": "busybox"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"]}}]}})
        pod = await wait_for(lambda: get_or_none(api, "pods", "db-0", namespace), timeout=10,
                             what="db-0")
        assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}} in \
            pod["spec"]["volumes"]
        claim = await api.get("persistentvolumeclaims", "data-db-0", namespace)
        assert "ownerReferences" not in claim["metadata"]  # Retain: the set does not own it
        await a.run_pod(namespace, "db-0")
        volume = f"pvc-{claim['metadata']['uid']}"
        await wait_for(lambda: _attached_to(api, volume, a.name), timeout=10,
                       what="db-0's volume attached")

        await api.delete("pods", "db-0", namespace)
        await a.finish_termination(namespace, "db-0")

        async def replaced() -> Obj | None:
            p = await get_or_none(api, "pods", "db-0", namespace)
            return p if p and p["metadata"]["uid"] != pod["metadata"]["uid"] else None

        await wait_for(replaced, timeout=10, what="db-0 recreated")
        kept = await api.get("persistentvolumeclaims", "data-db-0", namespace)
        assert kept["metadata"]["uid"] == claim["metadata"]["uid"], "Retain: same claim"
