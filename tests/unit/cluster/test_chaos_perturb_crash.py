"""Issue 35 item 1: `perturb.crash_on_write` stores a valid crash-on-write Perturbation and
blames a bad argument by its parameter before sending anything."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import validate
from skiff.client.fake import FakeClient
from skiff.cluster.chaos import perturb

USER = "system:serviceaccount:shop:operator"


async def test_ct1_crash_on_write_stores_a_valid_perturbation() -> None:
    client = FakeClient()
    name = await perturb.crash_on_write(client, user=USER, after=3, resources=["configmaps"],
                                        verbs=["CREATE"], pid=4242, name="op-crash")
    assert name == "op-crash"
    stored = client.stored("perturbations", "op-crash")
    assert stored is not None
    assert stored["spec"] == {"subject": {"user": USER}, "crashOnWrite": {
        "after": 3, "resources": ["configmaps"], "verbs": ["create"],
        "target": {"pid": 4242}}}
    assert validate(stored) == []


def test_ct1_crash_on_write_spec_names_a_pod_target() -> None:
    spec = perturb.crash_on_write_spec(group="ops", after=1, pod=("shop", "op-0", "main"))
    assert spec["crashOnWrite"]["target"] == {
        "pod": {"namespace": "shop", "name": "op-0", "container": "main"}}


@pytest.mark.parametrize(("kwargs", "param"), [
    pytest.param({"after": 0, "pid": 10}, "after", id="after-zero"),
    pytest.param({"after": 1, "verbs": ["get"], "pid": 10}, "verbs", id="read-verb"),
    pytest.param({"after": 1}, "pid", id="no-target"),
    pytest.param({"after": 1, "pid": 10, "pod": ("a", "b", None)}, "pid", id="two"),
    pytest.param({"after": 1, "pid": 1}, "pid", id="init"),
    pytest.param({"after": 1, "pid": 10, "resources": [" "]}, "resources", id="empty"),
])
async def test_ct1_crash_on_write_blames_the_bad_parameter(kwargs: dict[str, Any],
                                                           param: str) -> None:
    client = FakeClient()
    with pytest.raises(perturb.PerturbationError) as caught:
        await perturb.crash_on_write(client, user=USER, **kwargs)
    assert caught.value.param == param
    assert client.calls("create") == []
