"""SPEC WL2 / WL3: ControllerRevisions of StatefulSets and DaemonSets across `kubectl rollout
undo` (Kubernetes' controller history: the StatefulSet controller's `getStatefulSetRevisions`
and the DaemonSet controller's `constructHistory`). A template that goes back to an earlier
revision makes that revision the newest (renumbered max + 1), so a second undo goes to the
revision before it instead of re-applying the current template."""

from __future__ import annotations

import copy

from skiff.api.types import Obj
from skiff.client.fake import FakeClient, conflicting
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


def put(api: FakeClient, revision: Obj) -> Obj:
    """Store a ControllerRevision as the apiserver has it; returns a copy."""
    revision = copy.deepcopy(revision)
    revision["metadata"].setdefault("uid", f"uid-{revision['metadata']['name']}")
    return copy.deepcopy(api.add(revision)[0])


def stored_revisions(api: FakeClient) -> list[Obj]:
    return copy.deepcopy(api.objects("controllerrevisions"))


def numbers(api: FakeClient) -> dict[str, int]:
    """Each stored ControllerRevision's number, by name."""
    return {r["metadata"]["name"]: int(r["revision"]) for r in stored_revisions(api)}


def renumbered(api: FakeClient) -> list[tuple[str, int]]:
    """The ControllerRevisions written (and not refused), with their new numbers."""
    return [(a.name, int(a.object["revision"]))
            for a in api.calls("update", "controllerrevisions", failed=False) if a.object]


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
        self.api = FakeClient()
        self.ctl = StatefulSetController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=FakeClock()))

    def given(self, image: str, number: int) -> str:
        stored = put(self.api, sts_revisions.new_revision(workload("StatefulSet", image),
                                                         number))
        return str(stored["metadata"]["name"])

    async def sync(self, image: str) -> Obj:
        cache(self.ctl, stored_revisions(self.api))
        update, _ = await self.ctl.sync_revisions(workload("StatefulSet", image), [])
        return update


async def test_wl2_rollout_undo_makes_the_restored_revision_newest() -> None:
    h = StatefulSetHarness()
    v1, v2 = h.given("web:1", 1), h.given("web:2", 2)
    update = await h.sync("web:1")  # first undo: back to revision 1's template
    assert update["metadata"]["name"] == v1
    assert numbers(h.api) == {v1: 3, v2: 2}
    assert previous_revision(numbers(h.api)) == v2  # so a second undo goes to web:2
    update = await h.sync("web:2")
    assert update["metadata"]["name"] == v2
    assert numbers(h.api) == {v1: 3, v2: 4}


async def test_wl2_newest_revision_is_not_renumbered() -> None:
    h = StatefulSetHarness()
    h.given("web:1", 1)
    v2 = h.given("web:2", 2)
    update = await h.sync("web:2")
    assert update["metadata"]["name"] == v2
    assert renumbered(h.api) == []


async def test_wl2_stale_cache_does_not_renumber_twice() -> None:
    h = StatefulSetHarness()
    v1, v2 = h.given("web:1", 1), h.given("web:2", 2)
    stale = stored_revisions(h.api)
    await h.sync("web:1")
    cache(h.ctl, stale)  # the informer has not seen the renumbering yet
    update, _ = await h.ctl.sync_revisions(workload("StatefulSet", "web:1"), [])
    assert int(update["revision"]) == 3
    assert numbers(h.api) == {v1: 3, v2: 2}
    assert renumbered(h.api) == [(v1, 3)]


def test_wl2_revision_data_replaces_the_whole_template() -> None:
    sts = workload("StatefulSet", "web:1")
    revision = sts_revisions.new_revision(sts, 1)
    assert revision["data"]["spec"]["template"]["$patch"] == "replace"
    assert sts_revisions.template_of(revision) == sts["spec"]["template"]


class DaemonSetHarness:
    def __init__(self) -> None:
        self.api = FakeClient()
        self.ctl = DaemonSetController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=FakeClock()))

    async def sync(self, image: str) -> str:
        ds = workload("DaemonSet", image)
        pod_hash = ds_plan.template_hash(ds["spec"]["template"])
        cache(self.ctl, stored_revisions(self.api))
        await self.ctl.ensure_revision(ds, pod_hash)
        return f"web-{pod_hash}"


async def test_wl3_rollout_undo_makes_the_restored_revision_newest() -> None:
    h = DaemonSetHarness()
    v1 = await h.sync("web:1")
    v2 = await h.sync("web:2")
    assert numbers(h.api) == {v1: 1, v2: 2}
    assert await h.sync("web:1") == v1  # first undo
    assert numbers(h.api) == {v1: 3, v2: 2}
    assert previous_revision(numbers(h.api)) == v2
    await h.sync("web:2")  # second undo
    assert numbers(h.api) == {v1: 3, v2: 4}
    await h.sync("web:2")  # nothing changed: no write
    assert renumbered(h.api) == [(v1, 3), (v2, 4)]


async def test_make_revision_newest_retries_a_conflict() -> None:
    api = FakeClient()
    sts = workload("StatefulSet", "web:1")
    old = put(api, {**sts_revisions.new_revision(sts, 1),
                   "metadata": {"name": "web-a", "namespace": NS,
                                "ownerReferences": [owner_reference(sts)]}})
    other = put(api, {**sts_revisions.new_revision(sts, 5),
                     "metadata": {"name": "web-b", "namespace": NS}})
    api.prepend_reactor("update", "controllerrevisions", conflicting(api))
    stored = await make_revision_newest(api, old, [old, other])
    assert int(stored["revision"]) == 6
    assert numbers(api) == {"web-a": 6, "web-b": 5}


async def test_make_revision_newest_leaves_the_newest_alone() -> None:
    api = FakeClient()
    sts = workload("StatefulSet", "web:1")
    newest = put(api, {**sts_revisions.new_revision(sts, 6),
                      "metadata": {"name": "web-a", "namespace": NS}})
    other = put(api, {**sts_revisions.new_revision(sts, 5),
                     "metadata": {"name": "web-b", "namespace": NS}})
    assert await make_revision_newest(api, newest, [newest, other]) == newest
    assert renumbered(api) == []
