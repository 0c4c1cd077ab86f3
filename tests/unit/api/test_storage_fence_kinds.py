"""SPEC SC1 / FN1 object shapes: PersistentVolumeClaim, VolumeAttachment, Fence."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, prune_unknown_fields, validate
from skiff.api.types import Obj


def _fence(**spec: Any) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Fence", "metadata": {"name": "node-1"},
            "spec": {"nodeName": "node-1", "agent": "power", "reason": "partitioned",
                     **spec}}


def _attachment(node: str = "node-1") -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": "pvc-1"},
            "spec": {"attacher": "skiff.io/local", "nodeName": node,
                     "source": {"persistentVolumeName": "pvc-1"}}}


def _pvc(*modes: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-0", "namespace": "default"},
            "spec": {"accessModes": list(modes),
                     "resources": {"requests": {"storage": "1Gi"}}}}


@pytest.mark.parametrize(("obj", "path"), [
    pytest.param(_fence(nodeName=""), "spec.nodeName: Required value", id="fence-no-node"),
    pytest.param(_fence(nodeName="node-2"), "spec.nodeName: Invalid value",
                 id="fence-named-after-node"),
    pytest.param(_fence(agent="laser"), "spec.agent: Unsupported value", id="fence-agent"),
    pytest.param(_pvc(), "spec.accessModes: Required value", id="pvc-modes"),
    pytest.param(_pvc("ReadWriteSometimes"), "spec.accessModes[0]: Unsupported value",
                 id="pvc-bad-mode"),
])
def test_fn1_sc1_invalid_objects_name_the_field(obj: Obj, path: str) -> None:
    assert any(str(e).startswith(path) for e in validate(obj)), validate(obj)


@pytest.mark.parametrize("obj", [
    pytest.param(_fence(), id="fence"), pytest.param(_attachment(), id="attachment"),
    pytest.param(_pvc("ReadWriteOnce"), id="pvc")])
def test_valid_objects_pass_and_prune_to_nothing(obj: Obj) -> None:
    apply_defaults(obj)
    assert validate(obj) == []
    assert prune_unknown_fields(obj) == []


def test_sc1_an_attachment_never_moves_to_another_node() -> None:
    errors = validate(_attachment("node-2"), old=_attachment("node-1"))
    assert any("spec is immutable" in str(e) for e in errors)


def test_fn1_fence_starts_pending() -> None:
    fence = _fence()
    apply_defaults(fence)
    assert fence["status"]["phase"] == "Pending"
