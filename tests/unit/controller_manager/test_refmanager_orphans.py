"""Adoption race (seen under load in test_adoption): a re-created owner must find the pods a
`--cascade=orphan` deletion orphaned even when its pod cache still shows the old owner."""

from __future__ import annotations

import copy

from skiff.api.types import Obj
from skiff.client import Informer
from skiff.client.fake import FakeClient
from skiff.controller_manager.refmanager import RefManager


def _rs(uid: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "keep", "namespace": "ns", "uid": uid},
            "spec": {"selector": {"matchLabels": {"app": "keep"}}}}


def _pod(name: str, owner_uid: str | None) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "uid": f"pod-{name}",
                 "labels": {"app": "keep"}, "resourceVersion": "1"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": "keep", "uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def _owners(*sets: Obj) -> Informer:
    """A ReplicaSet informer whose cache holds `sets`."""
    owners = Informer(FakeClient(), "replicasets")
    for rs in sets:
        owners.store.put(rs)
    return owners


async def test_wl7_pods_cached_under_a_deleted_owner_are_reread_and_found_orphaned() -> None:
    api = FakeClient()
    cached = [_pod("a", "old-uid"), _pod("b", "old-uid"), _pod("c", None)]
    for pod in cached:  # the apiserver already has them orphaned
        fresh = copy.deepcopy(pod)
        fresh["metadata"].pop("ownerReferences", None)
        api.add(fresh)
    refs = RefManager(api, _rs("new-uid"), "pods")
    found = await refs.orphans(cached, _owners(_rs("new-uid")))
    assert sorted(p["metadata"]["name"] for p in found) == ["a", "b", "c"]
    assert all("ownerReferences" not in p["metadata"] for p in found)


async def test_wl7_pods_of_a_live_owner_or_still_owned_are_not_orphans() -> None:
    api = FakeClient()
    live = _rs("other-uid") | {"metadata": {"name": "keep-other", "namespace": "ns",
                                            "uid": "other-uid"}}
    mine = _pod("m", "other-uid")
    mine["metadata"]["ownerReferences"][0]["name"] = "keep-other"
    still = _pod("s", "old-uid")  # the apiserver still has the old owner's reference
    api.add(still)
    refs = RefManager(api, _rs("new-uid"), "pods")
    assert await refs.orphans([mine, still], _owners(_rs("new-uid"), live)) == []
