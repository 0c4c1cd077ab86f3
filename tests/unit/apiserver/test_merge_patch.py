"""PATCH semantics of the kubectl front: JSON merge patch and the strategic subset."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.apiserver.kubeapi import merge_patch

POD: dict[str, Any] = {"metadata": {"labels": {"a": "1", "b": "2"}},
                       "spec": {"containers": [{"name": "x", "image": "old"},
                                               {"name": "y", "image": "keep"}]}}


@pytest.mark.parametrize(("patch", "strategic", "expected_labels", "expected_images"), [
    pytest.param({"metadata": {"labels": {"c": "3"}}}, False, {"a": "1", "b": "2", "c": "3"},
                 ["old", "keep"], id="add-label"),
    pytest.param({"metadata": {"labels": {"a": None}}}, False, {"b": "2"}, ["old", "keep"],
                 id="null-removes"),
    pytest.param({"spec": {"containers": [{"name": "x", "image": "new"}]}}, False,
                 {"a": "1", "b": "2"}, ["new"], id="merge-replaces-lists"),
    pytest.param({"spec": {"containers": [{"name": "x", "image": "new"}]}}, True,
                 {"a": "1", "b": "2"}, ["keep", "new"], id="strategic-merges-by-name"),
    pytest.param({"$retainKeys": ["x"], "metadata": {"labels": {"b": "9"}}}, True,
                 {"a": "1", "b": "9"}, ["old", "keep"], id="strategic-drops-directives"),
])
def test_merge_patch(patch: dict[str, Any], strategic: bool, expected_labels: dict[str, str],
                     expected_images: list[str]) -> None:
    result = merge_patch(POD, patch, strategic=strategic)
    assert result["metadata"]["labels"] == expected_labels
    assert sorted(c["image"] for c in result["spec"]["containers"]) == sorted(expected_images)
    assert POD["metadata"]["labels"] == {"a": "1", "b": "2"}, "input must not be mutated"
