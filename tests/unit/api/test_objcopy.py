"""`deep_copy`: the hot paths' object copy shares nothing mutable with the original."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from skiff.api.objcopy import deep_copy


def test_deep_copy_of_an_object_is_equal_and_independent() -> None:
    pod: Any = {"metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": ["x"]},
                "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}],
                         "priority": 0, "activeDeadlineSeconds": 1.5, "hostNetwork": False,
                         "nodeName": None},
                "data": b"\x00\x01"}
    copied = deep_copy(pod)
    assert copied == pod
    copied["metadata"]["labels"]["a"] = "changed"
    copied["metadata"]["finalizers"].append("y")
    copied["spec"]["containers"][0]["ports"][0]["containerPort"] = 81
    assert pod["metadata"]["labels"] == {"a": "b"}
    assert pod["metadata"]["finalizers"] == ["x"]
    assert pod["spec"]["containers"][0]["ports"][0]["containerPort"] == 80


def test_deep_copy_copies_what_is_not_json_shaped_with_copy_deepcopy() -> None:
    @dataclasses.dataclass
    class Box:
        items: list[int]

    original: Any = {"ordered": collections.OrderedDict(a=[1]), "tuple": ([1],), "box": Box([1])}
    copied = deep_copy(original)
    assert copied == original
    copied["ordered"]["a"].append(2)
    copied["tuple"][0].append(2)
    copied["box"].items.append(2)
    assert original == {"ordered": collections.OrderedDict(a=[1]), "tuple": ([1],),
                        "box": Box([1])}
    assert type(copied["ordered"]) is collections.OrderedDict
