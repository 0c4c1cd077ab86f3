"""The Deployment controller's arithmetic, Kubernetes' numbers."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.controller_manager.deployment import plan


def deployment(replicas: int, surge: Any = "25%", unavailable: Any = "25%",
               strategy: str = "RollingUpdate") -> Obj:
    spec: Obj = {"replicas": replicas, "strategy": {"type": strategy}}
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"metadata": {"generation": 1}, "spec": spec}


def rs(name: str, replicas: int, available: int, created: str = "2026-01-01T00:00:00Z"
       ) -> Obj:
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"replicas": replicas}, "status": {"availableReplicas": available}}


@pytest.mark.parametrize(("d", "expected"), [
    pytest.param(deployment(10), (3, 2), id="25%-rounds-surge-up-unavailable-down"),
    pytest.param(deployment(3, 1, 0), (1, 0), id="surge-1-unavailable-0"),
    pytest.param(deployment(3, 0, 0), (0, 1), id="both-zero-means-one-unavailable"),
    pytest.param(deployment(3, strategy="Recreate"), (0, 0), id="recreate"),
])
def test_surge_and_unavailable_fenceposts(d: Obj, expected: tuple[int, int]) -> None:
    assert plan.surge_and_unavailable(d) == expected


def test_rolling_update_max_surge_one_never_below_desired_available() -> None:
    d = deployment(3, 1, 0)
    old, new = rs("old", 3, 3), rs("new", 0, 0, "2026-01-02T00:00:00Z")
    assert plan.new_replicas_target(d, new, [old, new]) == 1  # one surge pod
    new = rs("new", 1, 0, "2026-01-02T00:00:00Z")
    assert plan.old_scale_downs(d, new, [old]) == {}  # the new pod is not available yet
    new = rs("new", 1, 1, "2026-01-02T00:00:00Z")
    assert plan.old_scale_downs(d, new, [old]) == {"old": 2}
    assert plan.new_replicas_target(d, new, [rs("old", 2, 2), new]) == 2


def test_unavailable_old_replicas_go_first() -> None:
    d = deployment(4, 1, 1)
    old = rs("old", 4, 2)  # two old pods are not available
    new = rs("new", 1, 0, "2026-01-02T00:00:00Z")
    assert plan.old_scale_downs(d, new, [old]) == {"old": 3}


def test_new_set_is_found_ignoring_the_hash_label_and_empty_fields() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "c", "image": "nginx"}]}}
    d = {"spec": {"template": template}}
    stored = {"metadata": {"name": "web-abc", "creationTimestamp": "x"}, "spec": {"template": {
        "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"},
                     "creationTimestamp": None},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}]}}}}
    assert plan.find_new(d, [stored]) is stored
    assert plan.template_hash(template) == plan.template_hash(
        {**template, "metadata": {"labels": {"app": "web"}, "creationTimestamp": None}})
    assert plan.template_hash(template) != plan.template_hash(template, 1)


def test_next_revision_follows_the_highest() -> None:
    sets = [{"metadata": {"annotations": {"deployment.kubernetes.io/revision": r}}}
            for r in ("1", "4", "2")]
    assert plan.next_revision(sets) == 5
