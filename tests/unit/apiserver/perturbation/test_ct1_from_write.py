"""CT1 `staleView.fromWrite: K` (issue 35 part 2; Kubernetes issue 59848 made
deterministic): the identity's view is the present until its own K-th committed write,
then pinned at that write's revision - 1 — its cached reads and watches no longer see its
own write nor anything later, its consistent reads do — until the Perturbation is
deleted. The pin is recorded in status.pinnedRevision."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.rules import Effective, RevisionTimes, parse, view_revision
from skiff.auth import UserInfo
from tests.unit.apiserver.perturbation.helpers import applied, cm, pert, running_registry


def test_ct1_from_write_view_is_the_present_until_pinned() -> None:
    rule = parse(pert(subject={"user": "op"}, staleView={"fromWrite": 2}))
    assert rule is not None and rule.stale is not None and rule.stale.from_write == 2
    times = RevisionTimes()
    assert view_revision(rule.stale, head=50, times=times, now=0.0) == 0
    assert view_revision(rule.stale, head=50, times=times, now=0.0, pinned=41) == 41
    lag = parse(pert(name="q", subject={"user": "op"}, staleView={"lagRevisions": 5}))
    assert lag is not None
    both = Effective((rule, lag))
    assert both.view(head=50, times=times, now=0.0) == 45  # unpinned: the lag alone
    assert both.view(head=50, times=times, now=0.0, pins={rule.uid: 30}) == 30
    assert both.stalest(head=50, times=times, now=0.0, pins={rule.uid: 30}) is rule


def _names(listed: dict[str, object]) -> list[str]:
    items = listed["items"]
    assert isinstance(items, list)
    return [i["metadata"]["name"] for i in items]


async def test_ct1_from_write_hides_the_identitys_own_write_until_healed() -> None:
    async with running_registry() as registry:
        await registry.create("configmaps", "default", cm("a"))
        made = await registry.create("perturbations", None, pert(
            subject={"user": "op"}, staleView={"fromWrite": 1}))
        await applied(registry, "p")
        current_user.set(UserInfo("op"))
        assert _names(await registry.list("configmaps", "default", allow_cached=True)) == ["a"]
        mine = await registry.create("configmaps", "default", cm("mine"))
        rev = int(mine.object["metadata"]["resourceVersion"])
        current_user.set(UserInfo("admin"))
        await registry.create("configmaps", "default", cm("later"))
        current_user.set(UserInfo("op"))
        cached = await registry.list("configmaps", "default", allow_cached=True)
        assert (_names(cached), cached["metadata"]["resourceVersion"]) == (["a"], str(rev - 1))
        fresh = await registry.list("configmaps", "default")
        assert _names(fresh) == ["a", "later", "mine"]
        watch = registry.watch_batches("configmaps", "default", resource_version=str(rev - 1))
        assert isinstance(watch, AsyncGenerator)
        pending = asyncio.ensure_future(anext(watch))
        await asyncio.sleep(0.3)
        assert not pending.done()  # its own write is past the pinned view: held
        async with asyncio.timeout(3):  # the pin is written to the status
            while (await registry.get("perturbations", None, "p")).get(
                    "status", {}).get("pinnedRevision") != rev - 1:
                await asyncio.sleep(0.02)
        await registry.delete("perturbations", None, "p")
        batch = await asyncio.wait_for(pending, 3)
        assert [(e.type, e.object["metadata"]["name"]) for e in batch][:1] == [
            ("ADDED", "mine")]
        await watch.aclose()
        await applied(registry, "p", present=False)
        healed = await registry.list("configmaps", "default", allow_cached=True)
        assert _names(healed) == ["a", "later", "mine"]
        assert made.object["metadata"]["uid"] not in registry.perturbations.pins

