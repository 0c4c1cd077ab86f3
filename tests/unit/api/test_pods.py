"""Pod helpers and the test builders that the rest of Skiff's tests reuse (LC1, GT)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import get_condition, is_pod_terminal, is_terminating, pod_key, validate
from skiff.api.testing import DO_NOT_SCHEDULE, make_node, make_pod


@pytest.mark.parametrize(("obj", "key"), [
    pytest.param(make_pod("p").namespace("prod").obj(), "prod/p", id="namespaced"),
    pytest.param(make_node("n1").obj(), "n1", id="cluster-scoped"),
    pytest.param({}, "", id="empty"),
])
def test_pod_key(obj: dict[str, Any], key: str) -> None:
    assert pod_key(obj) == key


@pytest.mark.parametrize(("phase", "terminal"), [
    pytest.param("Pending", False, id="pending"),
    pytest.param("Running", False, id="running"),
    pytest.param("Succeeded", True, id="succeeded"),
    pytest.param("Failed", True, id="failed"),
    pytest.param("Unknown", False, id="unknown"),
])
def test_lc1_terminal_phases(phase: str, terminal: bool) -> None:
    assert is_pod_terminal(make_pod("p").phase(phase).obj()) is terminal


def test_gt_terminating_means_deletion_timestamp() -> None:
    assert not is_terminating(make_pod("p").obj())
    assert is_terminating(make_pod("p").terminating().obj())


def test_lc5_get_condition() -> None:
    pod = make_pod("p").condition("Ready", "False", reason="ContainersNotReady").obj()
    assert get_condition(pod, "Ready") == {"type": "Ready", "status": "False",
                                           "reason": "ContainersNotReady"}
    assert get_condition(pod, "PodScheduled") is None
    assert get_condition({}, "Ready") is None


def test_builder_output_is_valid_and_independent() -> None:
    builder = make_pod("p").label("foo", "").container("c", command=["sleep", "1"]).node("n1")
    first, second = builder.obj(), builder.obj()
    first["metadata"]["labels"]["x"] = "y"
    assert "x" not in second["metadata"]["labels"]
    assert second["spec"]["nodeName"] == "n1"
    assert validate(second) == []
    spread = make_pod("q").spread(1, "zone", DO_NOT_SCHEDULE, {"matchLabels": {"a": "b"}}).obj()
    assert spread["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == DO_NOT_SCHEDULE
    assert validate(make_node("n1").taint("k", "NoSchedule").obj()) == []
