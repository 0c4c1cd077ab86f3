"""SPEC AX4: which PersistentVolume a claim binds to (the binder's pure rules)."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.controller_manager.volumebinding.matching import (
    default_class,
    find_matching_volume,
    provisioned_volume,
)


def make_claim(size: str = "2Gi", *, cls: str | None = "manual",
               modes: tuple[str, ...] = ("ReadWriteOnce",),
               selector: Obj | None = None) -> Obj:
    spec: Obj = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if selector is not None:
        spec["selector"] = selector
    return {"metadata": {"name": "data", "namespace": "ns", "uid": "c-uid"}, "spec": spec}


def make_volume(name: str, size: str, *, cls: str = "manual",
                modes: tuple[str, ...] = ("ReadWriteOnce",), labels: Obj | None = None,
                claim_ref: Obj | None = None, phase: str = "Available") -> Obj:
    spec: Obj = {"capacity": {"storage": size}, "accessModes": list(modes),
                 "storageClassName": cls, "hostPath": {"path": f"/tmp/{name}"}}
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"phase": phase}}


@pytest.mark.parametrize(("claim", "volumes", "chosen"), [
    pytest.param(make_claim(), [make_volume("a", "1Gi"), make_volume("b", "5Gi"),
                                make_volume("c", "3Gi")], "c", id="smallest-that-fits"),
    pytest.param(make_claim(), [make_volume("a", "5Gi", cls="fast")], None,
                 id="other-class"),
    pytest.param(make_claim(modes=("ReadWriteMany",)), [make_volume("a", "5Gi")], None,
                 id="missing-access-mode"),
    pytest.param(make_claim(modes=("ReadWriteOnce",)),
                 [make_volume("a", "5Gi", modes=("ReadWriteOnce", "ReadOnlyMany"))], "a",
                 id="superset-of-modes"),
    pytest.param(make_claim(), [make_volume("a", "5Gi", phase="Released")], None,
                 id="released-is-not-reused"),
    pytest.param(make_claim(), [make_volume("a", "5Gi", claim_ref={
        "namespace": "other", "name": "x", "uid": "x-uid"})], None, id="claimed-by-another"),
    pytest.param(make_claim(), [make_volume("small", "3Gi"), make_volume(
        "pre", "9Gi", claim_ref={"namespace": "ns", "name": "data"}, phase="Pending")],
        "pre", id="pre-bound-wins"),
    pytest.param(make_claim(selector={"matchLabels": {"disk": "ssd"}}),
                 [make_volume("a", "3Gi"), make_volume("b", "4Gi", labels={"disk": "ssd"})],
                 "b", id="selector"),
    pytest.param(make_claim(cls=None), [make_volume("a", "3Gi", cls="")], "a",
                 id="no-class-matches-empty-class"),
])
def test_AX4_find_matching_volume(claim: Obj, volumes: list[Obj], chosen: str | None) -> None:
    found = find_matching_volume(claim, volumes)
    assert (found["metadata"]["name"] if found else None) == chosen


def test_AX4_default_class_is_the_newest_annotated_one() -> None:
    def sc(name: str, created: str, default: bool) -> Obj:
        annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default \
            else {}
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": annotations}, "provisioner": "x"}

    classes = [sc("old", "2026-01-01T00:00:00Z", True), sc("new", "2026-02-01T00:00:00Z", True),
               sc("plain", "2026-03-01T00:00:00Z", False)]
    assert default_class(classes)["metadata"]["name"] == "new"  # type: ignore[index]
    assert default_class(classes[2:]) is None


def test_AX4_provisioned_volume_follows_claim_and_class() -> None:
    cls = {"metadata": {"name": "standard"}, "provisioner": "skiff.io/local",
           "reclaimPolicy": "Delete"}
    pv = provisioned_volume(make_claim("7Gi", cls="standard"), cls)
    assert pv["metadata"]["name"] == "pvc-c-uid"
    assert pv["spec"]["capacity"] == {"storage": "7Gi"}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["claimRef"]["uid"] == "c-uid"
    assert pv["spec"]["csi"] == {"driver": "skiff.io/local", "volumeHandle": "pvc-c-uid"}
