"""SPEC EX2 in the controller-manager, on the in-memory client: the garbage collector and the
namespace controller follow CustomResourceDefinitions. Custom objects own and are owned
(background, foreground and orphan propagation), a kind is watched while its CRD is
established and no longer once the CRD goes, ownerReferences resolve by apiVersion and
kind, and deleting a namespace deletes its custom objects."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from skiff.api import ApiError, lookup
from skiff.api.kinds import unregister_custom
from skiff.api.ownership import FOREGROUND_FINALIZER, ORPHAN_FINALIZER
from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.client.interface import WatchEvent
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.garbagecollector import GarbageCollector
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.namespace import NamespaceController
from skiff.controller_manager.settings import ControllerManagerSettings

GROUP = "stable.example.com"
REF = f"crontabs.{GROUP}"
NS = "default"


def crd(*, established: bool = True, scope: str = "Namespaced") -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": REF, "uid": "crd-uid"},
            "spec": {"group": GROUP, "scope": scope,
                     "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established",
                                       "status": "True" if established else "False"}]}}


def owner_ref(obj: Obj, **extra: object) -> Obj:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"], **extra}


def crontab(name: str, *, owners: list[Obj] | None = None, namespace: str = NS) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": f"{GROUP}/v1", "kind": "CronTab", "metadata": meta,
            "spec": {"cronSpec": "* * * * */5"}}


def configmap(name: str, *, owners: list[Obj] | None = None, namespace: str = NS) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


async def eventually(check: Callable[[], bool], *, timeout: float = 3.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


def served() -> bool:
    try:
        lookup(REF)
    except ApiError:
        return False
    return True


@dataclass
class Running:
    client: FakeClient
    gc: GarbageCollector

    def has(self, resource: str, name: str, namespace: str = NS) -> bool:
        return self.client.stored(resource, name, namespace) is not None


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    client = FakeClient(crd())
    context = ControllerContext(client=client, informers=SharedInformers(client),
                                settings=ControllerManagerSettings())
    gc = GarbageCollector(context=context)
    namespaces = NamespaceController(context=context)
    gc.drain_timeout = namespaces.drain_timeout = 0.1  # nothing in flight at teardown
    tasks = [asyncio.create_task(context.informers.run()), asyncio.create_task(gc.run()),
             asyncio.create_task(namespaces.run())]
    try:
        await eventually(served)
        await eventually(lambda: REF in gc.informers and gc.informers[REF].has_synced)
        yield Running(client, gc)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        unregister_custom(REF)


async def test_ex2_a_configmap_owned_by_a_custom_object_goes_with_it(running: Running) -> None:
    owner = running.client.add(crontab("owner"))[0]
    running.client.add(configmap("dep", owners=[owner_ref(owner)]))
    await asyncio.sleep(0.1)
    assert running.has("configmaps", "dep")  # the owner exists: nothing to collect
    await running.client.delete(REF, "owner", NS)
    await eventually(lambda: not running.has("configmaps", "dep"))


async def test_ex2_a_custom_dependent_of_a_builtin_owner_is_collected(running: Running) -> None:
    owner = running.client.add(configmap("cm-owner"))[0]
    running.client.add(crontab("child", owners=[owner_ref(owner)]))
    await asyncio.sleep(0.1)
    assert running.has(REF, "child")
    await running.client.delete("configmaps", "cm-owner", NS)
    await eventually(lambda: not running.has(REF, "child"))


async def test_ex2_a_custom_dependent_of_a_custom_owner_whose_owner_was_already_gone(
        running: Running) -> None:
    # the owner was deleted before the dependent was seen: the live read finds it gone
    running.client.add(crontab("orphaned", owners=[
        {"apiVersion": f"{GROUP}/v1", "kind": "CronTab", "name": "never", "uid": "uid-x"}]))
    await eventually(lambda: not running.has(REF, "orphaned"))


async def test_ex2_foreground_deletion_of_a_custom_owner_waits_for_its_dependents(
        running: Running) -> None:
    owner = running.client.add(crontab("fg"))[0]
    running.client.add(configmap("fg-dep", owners=[owner_ref(owner, blockOwnerDeletion=True)]))
    await asyncio.sleep(0.1)
    deleting = copy.deepcopy(owner)
    deleting["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z",
                                finalizers=[FOREGROUND_FINALIZER])
    running.client.add(deleting)  # what a DELETE with propagationPolicy=Foreground leaves
    await eventually(lambda: not running.has("configmaps", "fg-dep")
                     and not running.has(REF, "fg"))


async def test_ex2_orphan_deletion_of_a_custom_owner_keeps_its_dependents(
        running: Running) -> None:
    owner = running.client.add(crontab("orph"))[0]
    running.client.add(configmap("kept", owners=[owner_ref(owner)]))
    await asyncio.sleep(0.1)
    deleting = copy.deepcopy(owner)
    deleting["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z",
                                finalizers=[ORPHAN_FINALIZER])
    running.client.add(deleting)
    await eventually(lambda: not running.has(REF, "orph"))
    kept = running.client.stored("configmaps", "kept", NS)
    assert kept is not None and not kept["metadata"].get("ownerReferences")


async def test_ex2_an_owner_of_another_group_is_not_found_by_kind_alone(
        running: Running) -> None:
    # A CronTab of a group no CRD serves owns this; a same-named CronTab of the served
    # group is another object. Kind alone would resolve the reference to it (uid differs:
    # "gone") and delete the dependent; by apiVersion the owner's kind is not served, so
    # the dependent is left alone, as kube leaves it.
    running.client.add(crontab("same"))
    running.client.add(configmap("other-group-dep", owners=[
        {"apiVersion": "other.example.com/v1", "kind": "CronTab", "name": "same",
         "uid": "uid-elsewhere"}]))
    running.client.add(configmap("served-group-dep", owners=[
        {"apiVersion": f"{GROUP}/v1", "kind": "CronTab", "name": "same",
         "uid": "uid-elsewhere"}]))
    await eventually(lambda: not running.has("configmaps", "served-group-dep"))
    assert running.has("configmaps", "other-group-dep")


async def test_ex2_a_kind_is_watched_while_its_crd_is_established(running: Running) -> None:
    running.client.add(crd(established=False))
    await eventually(lambda: REF not in running.gc.informers and not served())
    running.client.add(crd())
    await eventually(lambda: REF in running.gc.informers and served())
    await running.client.delete("customresourcedefinitions", REF)
    await eventually(lambda: REF not in running.gc.informers and not served())


async def test_ex2_dependents_of_objects_deleted_with_their_crd_are_collected(
        running: Running) -> None:
    # The apiserver deletes a CRD's objects, then the CRD: the kind stops being served
    # right after the owner went, and the dependent still goes.
    owner = running.client.add(crontab("with-crd"))[0]
    running.client.add(configmap("crd-dep", owners=[owner_ref(owner)]))
    await asyncio.sleep(0.1)
    await running.client.delete(REF, "with-crd", NS)
    await running.client.delete("customresourcedefinitions", REF)
    await eventually(lambda: not running.has("configmaps", "crd-dep"))


async def test_ex2_deleting_a_namespace_deletes_its_custom_objects(running: Running) -> None:
    # (a metadata finalizer keeps the in-memory client from dropping the Terminating
    # namespace at its first write, as the apiserver keeps it for its spec.finalizers)
    running.client.add({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": "doomed", "uid": "ns-uid",
                                     "finalizers": ["test.example.com/keep"]},
                        "spec": {"finalizers": ["kubernetes"]}})
    running.client.add(crontab("tab", namespace="doomed"),
                       configmap("cfg", namespace="doomed"))
    blocked = crontab("blocked", namespace="doomed")
    blocked["metadata"]["finalizers"] = ["example.com/hold"]
    running.client.add(blocked)
    ns = copy.deepcopy(running.client.stored("namespaces", "doomed"))
    assert ns is not None
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    running.client.add(ns)
    await eventually(lambda: not running.has(REF, "tab", "doomed")
                     and not running.has("configmaps", "cfg", "doomed"))

    def reported(kind: str = "NamespaceContentRemaining") -> str:
        stored = running.client.stored("namespaces", "doomed") or {}
        return next((c["message"] for c in (stored.get("status") or {}).get("conditions")
                     or [] if c["type"] == kind), "")

    await eventually(lambda: reported() ==
                     f"Some resources are remaining: {REF} has 1 resource instances")
    assert reported("NamespaceFinalizersRemaining") == (
        "Some finalizers are remaining: example.com/hold in 1 resource instances")
    held = copy.deepcopy(running.client.stored(REF, "blocked", "doomed"))
    assert held is not None and held["metadata"].get("deletionTimestamp")
    held["metadata"]["finalizers"] = []
    await running.client.update(held)
    await eventually(lambda: "kubernetes" not in (
        (running.client.stored("namespaces", "doomed") or {}).get("spec", {})
        .get("finalizers") or []))


def _behind() -> tuple[FakeClient, GarbageCollector]:
    """A garbage collector whose informers have not delivered anything yet: its graph is
    behind the apiserver (each kind is its own watch, so a dependent written just before
    its owner's deletion can reach the graph after it)."""
    client = FakeClient()
    context = ControllerContext(client=client, informers=SharedInformers(client),
                                settings=ControllerManagerSettings())
    return client, GarbageCollector(context=context)


def _deleting(owner: Obj, finalizer: str) -> Obj:
    marked = copy.deepcopy(owner)
    marked["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[finalizer])
    return marked


async def test_ex2_a_foreground_owner_is_not_released_before_the_graph_sees_its_dependent(
        ) -> None:
    client, gc = _behind()
    owner = client.add(configmap("fg-owner"))[0]
    client.add({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "fg-blocker", "namespace": NS, "uid": "uid-fg-blocker",
        "ownerReferences": [owner_ref(owner, blockOwnerDeletion=True)]}})
    owner = client.add(_deleting(owner, FOREGROUND_FINALIZER))[0]

    assert await gc.delete_dependents_first("configmaps", owner) is not None  # waits
    marked = client.stored("configmaps", "fg-owner", NS)
    assert marked is not None and FOREGROUND_FINALIZER in marked["metadata"]["finalizers"]
    assert client.stored("secrets", "fg-blocker", NS) is None  # deleted, bottom-up


async def test_ex2_an_orphaning_owner_orphans_a_dependent_the_graph_has_not_seen(
        ) -> None:
    client, gc = _behind()
    owner = client.add(configmap("orph-owner"))[0]
    client.add(configmap("orph-kept", owners=[owner_ref(owner)]))
    owner = client.add(_deleting(owner, ORPHAN_FINALIZER))[0]

    await gc.orphan_dependents("configmaps", owner)
    kept = client.stored("configmaps", "orph-kept", NS)
    assert kept is not None and not kept["metadata"].get("ownerReferences")
    assert client.stored("configmaps", "orph-owner", NS) is None  # finalizer gone: deleted


async def test_ex2_owners_marked_before_one_live_list_share_it() -> None:
    """A foreground owner's dependents are deleted in the foreground in turn: the live
    list that confirms the first one's dependents answers for every owner marked before
    it, one list a kind, not one a dependent."""
    client, gc = _behind()
    owners = [client.add(configmap(f"many-{i}"))[0] for i in range(5)]
    for owner in owners:
        client.add({"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": f"dep-of-{owner['metadata']['name']}", "namespace": NS,
            "uid": f"uid-dep-{owner['metadata']['name']}",
            "ownerReferences": [owner_ref(owner, blockOwnerDeletion=True)]}})
    marked = [client.add(_deleting(o, FOREGROUND_FINALIZER))[0] for o in owners]
    for owner in marked:
        assert await gc.delete_dependents_first("configmaps", owner) is not None
    assert [a.resource for a in client.actions if a.verb == "list"].count("secrets") == 1
    assert not [s for s in client.objects("secrets", NS)
                if s["metadata"]["name"].startswith("dep-of-many-")]


async def test_ex2_a_foreground_owner_waits_for_a_dependent_its_informer_delivers_meanwhile(
        ) -> None:
    # CI (stop 50): the graph's dependents were read before the live lists of the kinds
    # still behind were awaited; the configmap informer caught up during that await, so its
    # kind was trusted to the graph as read before, which lacked the dependent. The owner's
    # finalizer came off while its blocking dependent was still there.
    client, gc = _behind()
    owner = client.add(configmap("race-owner"))[0]
    blocker = client.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "race-blocker", "namespace": NS, "uid": "uid-race-blocker",
        "ownerReferences": [owner_ref(owner, blockOwnerDeletion=True)]}})[0]
    owner = client.add(_deleting(owner, FOREGROUND_FINALIZER))[0]
    configmaps = gc.informers["configmaps"]
    listed = gc._owned_live

    async def configmaps_catch_up_meanwhile(resource: str, namespace: str | None,
                                            revision: int) -> dict[str, list[Obj]]:
        if not configmaps.has_synced:  # while pods (listed first) are read live
            configmaps._synced.set()
            configmaps._apply(WatchEvent("ADDED", blocker))
            configmaps._apply(WatchEvent("MODIFIED", owner))
        return await listed(resource, namespace, revision)

    gc._owned_live = configmaps_catch_up_meanwhile  # type: ignore[method-assign]
    assert list(gc.informers).index("pods") < list(gc.informers).index("configmaps")

    assert await gc.delete_dependents_first("configmaps", owner) is not None  # waits
    marked = client.stored("configmaps", "race-owner", NS)
    assert marked is not None and FOREGROUND_FINALIZER in marked["metadata"]["finalizers"]


async def test_ex2_a_custom_owner_keeps_its_dependents_while_its_kind_is_not_served(
        running: Running) -> None:
    # A CRD no longer established takes its objects out of the graph, but their dependents
    # still name them: served again, a foreground deletion of the owner must wait for them.
    owner = running.client.add(crontab("paused"))[0]
    held = configmap("paused-dep", owners=[owner_ref(owner, blockOwnerDeletion=True)])
    held["metadata"]["finalizers"] = ["example.com/hold"]
    running.client.add(held)
    await eventually(lambda: bool(running.gc.dependents_of("uid-paused")))
    running.client.add(crd(established=False))
    await eventually(lambda: REF not in running.gc.informers)
    running.client.add(crd())
    await eventually(lambda: REF in running.gc.informers and running.gc.informers[REF].has_synced)
    dependents = running.gc.dependents_of("uid-paused")
    assert [(r, o["metadata"]["name"]) for r, o in dependents] == [("configmaps", "paused-dep")]
    running.client.add(_deleting(running.client.stored(REF, "paused", NS) or {},
                                 FOREGROUND_FINALIZER))
    dep = "configmaps", "paused-dep"
    await eventually(lambda: bool((running.client.stored(*dep, NS) or {})
                                  .get("metadata", {}).get("deletionTimestamp")))
    await asyncio.sleep(0.2)
    assert running.has(REF, "paused")  # still waiting for its blocking dependent
