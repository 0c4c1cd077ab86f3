"""SPEC AX3/AX4: validation and defaults of ServiceAccount, PersistentVolume and
StorageClass objects."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.types import Obj


def pv(**spec: Any) -> Obj:
    base: Obj = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/srv/a"}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "a"},
            "spec": {**base, **spec}}


@pytest.mark.parametrize(("obj", "problems"), [
    pytest.param(pv(), [], id="valid"),
    pytest.param(pv(capacity={}), ["spec.capacity"], id="no-capacity"),
    pytest.param(pv(accessModes=["ReadWriteSometimes"]), ["spec.accessModes[0]"],
                 id="bad-mode"),
    pytest.param(pv(hostPath=None), ["spec"], id="no-volume-type"),
    pytest.param(pv(local={"path": "/x"}), ["spec"], id="two-volume-types"),
    pytest.param(pv(persistentVolumeReclaimPolicy="Keep"),
                 ["spec.persistentVolumeReclaimPolicy"], id="bad-policy"),
    pytest.param({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": "s"}}, ["provisioner"], id="class-no-provisioner"),
    pytest.param({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": "s"}, "provisioner": "x",
                  "volumeBindingMode": "Later"}, ["volumeBindingMode"], id="class-bad-mode"),
    pytest.param({"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "robot", "namespace": "team"}}, [], id="account"),
])
def test_AX4_validation(obj: Obj, problems: list[str]) -> None:
    assert [e.path for e in validate(obj)] == problems


def test_AX4_defaults() -> None:
    volume, storage_class = pv(), {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                   "metadata": {"name": "s"}, "provisioner": "x"}
    apply_defaults(volume)
    apply_defaults(storage_class)
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["status"] == {"phase": "Pending"}
    assert (storage_class["reclaimPolicy"], storage_class["volumeBindingMode"]) == (
        "Delete", "Immediate")
