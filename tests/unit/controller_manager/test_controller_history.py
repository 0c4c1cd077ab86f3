"""SPEC WL2 / WL3: ControllerRevisions of StatefulSets and DaemonSets across `kubectl rollout
undo` (Kubernetes' controller history: the StatefulSet controller's `getStatefulSetRevisions`
and the DaemonSet controller's `constructHistory`). A template that goes back to an earlier
revision makes that revision the newest (renumbered max + 1), so a second undo goes to the
revision before it instead of re-applying the current template."""

from __future__ import annotations

import copy
from typing import cast

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import FakeClock
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.daemonset import DaemonSetController
from skiff.controller_manager.daemonset import plan as ds_plan
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.refmanager import make_revision_newest
from skiff.controller_manager.settings import ControllerManagerSettings
from skiff.controller_manager.statefulset import StatefulSetController
from skiff.controller_manager.statefulset import revisions as sts_revisions
from skiff.controller_manager.workload import owner_reference

NS = "ns"


class FakeRevisions:
    """ControllerRevisions by name with resourceVersion compare-and-swap; records writes."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.rv = 0
        self.updates: list[tuple[str, int]] = []
        self.conflicts = 0  # the next N updates fail as if someone else wrote first

    def put(self, obj: Obj) -> Obj:
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        stored["metadata"].setdefault("uid", f"uid-{stored['metadata']['name']}")
        self.objects[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        if resource != "controllerrevisions" or name not in self.objects:
            raise ApiError(Reason.NOT_FOUND, f'{resource} "{name}" not found')
        return copy.deepcopy(self.objects[name])

    async def create(self, obj: Obj) -> Obj:
        if obj.get("kind") == "ControllerRevision":
            if obj["metadata"]["name"] in self.objects:
                raise ApiError(Reason.ALREADY_EXISTS, "exists")
            return self.put(obj)
        return copy.deepcopy(obj)  # events

    async def update(self, obj: Obj) -> Obj:
        name = obj["metadata"]["name"]
        current = self.objects.get(name)
        if current is None:
            raise ApiError(Reason.NOT_FOUND, "gone")
        if self.conflicts:
            self.conflicts -= 1
            self.put(current)
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        if current["metadata"]["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        self.updates.append((name, int(obj["revision"])))
        return self.put(obj)

    def numbers(self) -> dict[str, int]:
        return {name: int(r["revision"]) for name, r in self.objects.items()}


def template(image: str) -> Obj:
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": image}]}}


def workload(kind: str, image: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "web", "namespace": NS, "uid": "set-1", "generation": 1},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                     "template": template(image)},
            "status": {}}


def cache(ctl: StatefulSetController | DaemonSetController, objects: list[Obj]) -> None:
    """What the ControllerRevision informer holds (names never change, so put replaces)."""
    for obj in objects:
        ctl.revisions.store.put(copy.deepcopy(obj))


def previous_revision(revisions: dict[str, int]) -> str:
    """What `kubectl rollout undo` (toRevision 0) goes back to: the second newest."""
    return sorted(revisions, key=revisions.__getitem__)[-2]


class StatefulSetHarness:
    def __init__(self) -> None:
        self.api = FakeRevisions()
        client = cast(ApiClient, self.api)
        self.ctl = StatefulSetController(context=ControllerContext(
            client=client, informers=SharedInformers(client),
            settings=ControllerManagerSettings(), clock=FakeClock()))

    def given(self, image: str, number: int) -> str:
        stored = self.api.put(sts_revisions.new_revision(workload("StatefulSet", image),
                                                         number))
        return str(stored["metadata"]["name"])

    async def sync(self, image: str) -> Obj:
        cache(self.ctl, list(self.api.objects.values()))
        update, _ = await self.ctl.sync_revisions(workload("StatefulSet", image), [])
        return update


async def test_wl2_rollout_undo_makes_the_restored_revision_newest() -> None:
    h = StatefulSetHarness()
    v1, v2 = h.given("web:1", 1), h.given("web:2", 2)
    update = await h.sync("web:1")  # first undo: back to revision 1's template
    assert update["metadata"]["name"] == v1
    assert h.api.numbers() == {v1: 3, v2: 2}
    assert previous_revision(h.api.numbers()) == v2  # so a second undo goes to web:2
    update = await h.sync("web:2")
    assert update["metadata"]["name"] == v2
    assert h.api.numbers() == {v1: 3, v2: 4}


async def test_wl2_newest_revision_is_not_renumbered() -> None:
    h = StatefulSetHarness()
    h.given("web:1", 1)
    v2 = h.given("web:2", 2)
    update = await h.sync("web:2")
    assert update["metadata"]["name"] == v2
    assert h.api.updates == []


async def test_wl2_stale_cache_does_not_renumber_twice() -> None:
    h = StatefulSetHarness()
    v1, v2 = h.given("web:1", 1), h.given("web:2", 2)
    stale = list(h.api.objects.values())
    await h.sync("web:1")
    cache(h.ctl, stale)  # the informer has not seen the renumbering yet
    update, _ = await h.ctl.sync_revisions(workload("StatefulSet", "web:1"), [])
    assert int(update["revision"]) == 3
    assert h.api.numbers() == {v1: 3, v2: 2}
    assert h.api.updates == [(v1, 3)]


def test_wl2_revision_data_replaces_the_whole_template() -> None:
    sts = workload("StatefulSet", "web:1")
    revision = sts_revisions.new_revision(sts, 1)
    assert revision["data"]["spec"]["template"]["$patch"] == "replace"
    assert sts_revisions.template_of(revision) == sts["spec"]["template"]


class DaemonSetHarness:
    def __init__(self) -> None:
        self.api = FakeRevisions()
        client = cast(ApiClient, self.api)
        self.ctl = DaemonSetController(context=ControllerContext(
            client=client, informers=SharedInformers(client),
            settings=ControllerManagerSettings(), clock=FakeClock()))

    async def sync(self, image: str) -> str:
        ds = workload("DaemonSet", image)
        pod_hash = ds_plan.template_hash(ds["spec"]["template"])
        cache(self.ctl, list(self.api.objects.values()))
        await self.ctl.ensure_revision(ds, pod_hash)
        return f"web-{pod_hash}"


async def test_wl3_rollout_undo_makes_the_restored_revision_newest() -> None:
    h = DaemonSetHarness()
    v1 = await h.sync("web:1")
    v2 = await h.sync("web:2")
    assert h.api.numbers() == {v1: 1, v2: 2}
    assert await h.sync("web:1") == v1  # first undo
    assert h.api.numbers() == {v1: 3, v2: 2}
    assert previous_revision(h.api.numbers()) == v2
    await h.sync("web:2")  # second undo
    assert h.api.numbers() == {v1: 3, v2: 4}
    await h.sync("web:2")  # nothing changed: no write
    assert h.api.updates == [(v1, 3), (v2, 4)]


async def test_make_revision_newest_retries_a_conflict() -> None:
    api = FakeRevisions()
    sts = workload("StatefulSet", "web:1")
    old = api.put({**sts_revisions.new_revision(sts, 1),
                   "metadata": {"name": "web-a", "namespace": NS,
                                "ownerReferences": [owner_reference(sts)]}})
    other = api.put({**sts_revisions.new_revision(sts, 5),
                     "metadata": {"name": "web-b", "namespace": NS}})
    api.conflicts = 1
    stored = await make_revision_newest(cast(ApiClient, api), old, [old, other])
    assert int(stored["revision"]) == 6
    assert api.numbers() == {"web-a": 6, "web-b": 5}


async def test_make_revision_newest_leaves_the_newest_alone() -> None:
    api = FakeRevisions()
    sts = workload("StatefulSet", "web:1")
    newest = api.put({**sts_revisions.new_revision(sts, 6),
                      "metadata": {"name": "web-a", "namespace": NS}})
    other = api.put({**sts_revisions.new_revision(sts, 5),
                     "metadata": {"name": "web-b", "namespace": NS}})
    assert await make_revision_newest(cast(ApiClient, api), newest, [newest, other]) == newest
    assert api.updates == []
