"""LimitRange defaults (SetDefaults_LimitRangeItem), validation and canonical quantities."""

from __future__ import annotations

import pytest

from skiff.api.defaults import apply_defaults
from skiff.api.quantity import canonical
from skiff.api.types import Obj
from skiff.api.validation import validate


def _lr(*items: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": list(items)}}


def test_as1_limit_range_container_defaults_come_from_max_then_default_then_min() -> None:
    obj = _lr({"type": "Container", "max": {"cpu": "1", "memory": "1Gi"},
               "min": {"ephemeral-storage": "1Gi"}, "default": {"memory": "512Mi"}})
    apply_defaults(obj)
    item = obj["spec"]["limits"][0]
    assert item["default"] == {"memory": "512Mi", "cpu": "1"}
    assert item["defaultRequest"] == {"memory": "512Mi", "cpu": "1",
                                      "ephemeral-storage": "1Gi"}
    pod_item = _lr({"type": "Pod", "max": {"cpu": "1"}})
    apply_defaults(pod_item)
    assert "default" not in pod_item["spec"]["limits"][0]


@pytest.mark.parametrize(("item", "expected"), [
    ({"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
     "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1"),
    ({"type": "Container", "default": {"cpu": "2"}, "max": {"cpu": "1"}},
     "default value 2 is greater than max value 1"),
    ({"type": "Container", "defaultRequest": {"cpu": "2"}, "default": {"cpu": "1"}},
     "default request value 2 is greater than default limit value 1"),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}}, "ratio 0.5 is less than 1"),
    ({"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "2"},
      "maxLimitRequestRatio": {"cpu": "3"}}, "ratio 3 is greater than max/min = 2.000000"),
    ({"type": "Pod", "defaultRequest": {"cpu": "1"}},
     "spec.limits[0].defaultRequest: Forbidden: may not be specified when `type` is 'Pod'"),
    ({"type": "Node"}, 'spec.limits[0].type: Unsupported value: "Node"'),
    ({"max": {"cpu": "1"}}, "spec.limits[0].type: Required value"),
    ({"type": "PersistentVolumeClaim"}, "either minimum or maximum storage value is required"),
    ({"type": "Container", "max": {"cpu": "lots"}}, "spec.limits[0].max[cpu]"),
])
def test_as7_limit_range_validation_names_the_field_and_kubernetes_reason(
        item: Obj, expected: str) -> None:
    messages = [str(e) for e in validate(_lr(item))]
    assert any(expected in m for m in messages), messages


@pytest.mark.parametrize(("text", "expected"), [
    ("1.5", "1500m"), ("0.5", "500m"), ("2000m", "2"), ("100m", "100m"), ("1500", "1500"),
    ("100000", "100k"), ("0.5Gi", "512Mi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"),
    ("129M", "129M"), ("0", "0"),
])
def test_ax6_canonical_quantity_is_what_kubernetes_writes_back(text: str, expected: str) -> None:
    assert canonical(text) == expected
