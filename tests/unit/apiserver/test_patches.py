"""AX1: PATCH bodies as kube-apiserver applies them (JSON, merge, strategic merge with
Kubernetes' own list strategies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skiff.api import ApiError
from skiff.apiserver.endpoints.handlers.patch import (
    apply_json_patch,
    merge_patch,
    strategic_merge_patch,
)

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x/one"]},
    "spec": {"containers": [{"name": "x", "image": "old", "args": ["1"]},
                            {"name": "y", "image": "keep"}],
             "tolerations": [{"key": "k1", "operator": "Exists"}]}}


def names(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["name"], c["image"]) for c in obj["spec"]["containers"]]


@pytest.mark.parametrize(("patch", "check"), [
    pytest.param({"spec": {"containers": [{"name": "x", "image": "new"}]}},
                 lambda o: names(o) == [("x", "new"), ("y", "keep")]
                 and o["spec"]["containers"][0]["args"] == ["1"],
                 id="containers-merge-by-name"),
    pytest.param({"spec": {"containers": [{"name": "z", "image": "added"}]}},
                 lambda o: names(o) == [("x", "old"), ("y", "keep"), ("z", "added")],
                 id="new-container-appended"),
    pytest.param({"spec": {"containers": [{"name": "x", "$patch": "delete"}]}},
                 lambda o: names(o) == [("y", "keep")], id="patch-delete-list-item"),
    pytest.param({"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}},
                 lambda o: [t["key"] for t in o["spec"]["tolerations"]] == ["k2"],
                 id="atomic-tolerations-replaced"),
    pytest.param({"metadata": {"finalizers": ["x/two"]}},
                 lambda o: o["metadata"]["finalizers"] == ["x/one", "x/two"],
                 id="finalizers-merge-as-set"),
    pytest.param({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/one"]}},
                 lambda o: o["metadata"]["finalizers"] == [], id="delete-from-primitive-list"),
    pytest.param({"spec": {"$setElementOrder/containers": [{"name": "y"}, {"name": "x"}],
                           "containers": [{"name": "x", "image": "new"}]}},
                 lambda o: names(o) == [("y", "keep"), ("x", "new")], id="set-element-order"),
    pytest.param({"metadata": {"labels": {"$patch": "replace", "only": "this"}}},
                 lambda o: o["metadata"]["labels"] == {"only": "this"}, id="patch-replace-map"),
    pytest.param({"metadata": {"labels": {"a": None}}},
                 lambda o: o["metadata"]["labels"] == {"b": "2"}, id="null-removes"),
])
def test_AX1_strategic_merge_patch_follows_kubernetes_schema(
        patch: dict[str, Any], check: Any) -> None:
    result = strategic_merge_patch("Pod", POD, patch)
    assert check(result), result
    assert names(POD) == [("x", "old"), ("y", "keep")], "input must not be mutated"


def test_AX1_merge_patch_replaces_lists() -> None:
    result = merge_patch(POD, {"spec": {"containers": [{"name": "x", "image": "new"}]}})
    assert names(result) == [("x", "new")]


def test_AX1_json_patch_adds_a_label_and_fails_a_test_op() -> None:
    ops = [{"op": "add", "path": "/metadata/labels/c", "value": "3"}]
    assert apply_json_patch(POD, json.dumps(ops).encode())["metadata"]["labels"]["c"] == "3"
    bad = [{"op": "test", "path": "/metadata/labels/a", "value": "no"}]
    with pytest.raises(ApiError) as err:
        apply_json_patch(POD, json.dumps(bad).encode())
    assert err.value.code == 422
    # evanphx/json-patch's words, not the Python library's ("'1' (<class 'str'>) is not ...")
    assert err.value.message == "testing value /metadata/labels/a failed: test failed"
    with pytest.raises(ApiError) as err:
        apply_json_patch(POD, b'{"op": "add"}')
    assert err.value.code == 400
    missing = [{"op": "replace", "path": "/spec/nope/deeper", "value": 1}]
    with pytest.raises(ApiError) as err:
        apply_json_patch(POD, json.dumps(missing).encode())
    assert err.value.message == ('replace operation does not apply: doc is missing path: '
                                 '"/spec/nope/deeper": missing value')
    assert "<class" not in err.value.message and "{" not in err.value.message
    with pytest.raises(ApiError) as err:
        apply_json_patch(POD, json.dumps([{"op": "frobnicate", "path": "/a"}]).encode())
    assert err.value.code == 422 and "'frobnicate'" in err.value.message
