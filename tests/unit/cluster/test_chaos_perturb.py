"""Issue 35's Python API (skiff.cluster.chaos.perturb): what a controller's test calls to
give one identity a stale view or missed events, and to heal — the Perturbation objects it
stores, and the parameter a bad argument is blamed on."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError, validate
from skiff.client.fake import FakeClient
from skiff.cluster.chaos import perturb

USER = "system:serviceaccount:shop:operator"


async def test_ct1_stale_view_stores_a_valid_perturbation_and_returns_its_name() -> None:
    client = FakeClient()
    name = await perturb.stale_view(client, user=USER, lag_revisions=20, name="op-stale")
    assert name == "op-stale"
    stored = client.stored("perturbations", "op-stale")
    assert stored is not None
    assert stored["spec"] == {"subject": {"user": USER}, "staleView": {"lagRevisions": 20}}
    assert validate(stored) == []


async def test_ct1_missed_events_without_a_name_gets_a_generated_one() -> None:
    client = FakeClient()
    name = await perturb.missed_events(client, group="ops", resources=["pods"],
                                       types=["modified", "MODIFIED"], names=["web-0"],
                                       coalesce_seconds=2)
    assert name.startswith("missed-events-")
    stored = client.stored("perturbations", name)
    assert stored is not None
    assert stored["spec"] == {"subject": {"group": "ops"}, "missedEvents": {
        "resources": ["pods"], "names": ["web-0"], "types": ["MODIFIED"],
        "coalesceSeconds": 2}}
    assert validate(stored) == []


async def test_ct1_missed_events_with_no_filter_misses_everything() -> None:
    client = FakeClient()
    name = await perturb.missed_events(client, user=USER)
    stored = client.stored("perturbations", name)
    assert stored is not None and stored["spec"]["missedEvents"] == {}


@pytest.mark.parametrize(("kwargs", "param"), [
    pytest.param({}, "user", id="no-subject"),
    pytest.param({"user": USER, "group": "ops", "revision": 3}, "user", id="two-subjects"),
    pytest.param({"group": " ", "revision": 3}, "group", id="blank-group"),
    pytest.param({"user": USER}, "revision", id="no-view"),
    pytest.param({"user": USER, "revision": 3, "lag_seconds": 2}, "lag_seconds",
                 id="two-views"),
    pytest.param({"user": USER, "lag_revisions": 0}, "lag_revisions", id="zero-lag"),
    pytest.param({"user": USER, "revision": -4}, "revision", id="negative-revision"),
])
async def test_ct1_stale_view_blames_the_bad_parameter_and_sends_nothing(
        kwargs: dict[str, Any], param: str) -> None:
    client = FakeClient()
    with pytest.raises(perturb.PerturbationError) as caught:
        await perturb.stale_view(client, **kwargs)
    assert caught.value.param == param
    assert client.calls("create") == []


@pytest.mark.parametrize(("kwargs", "param"), [
    pytest.param({"types": ["UPDATED"]}, "types", id="unknown-type"),
    pytest.param({"resources": [""]}, "resources", id="empty-resource"),
    pytest.param({"names": ["web-0", ""]}, "names", id="empty-name"),
    pytest.param({"coalesce_seconds": -1}, "coalesce_seconds", id="negative-coalesce"),
])
async def test_ct1_missed_events_blames_the_bad_parameter(kwargs: dict[str, Any],
                                                          param: str) -> None:
    with pytest.raises(perturb.PerturbationError) as caught:
        await perturb.missed_events(FakeClient(), user=USER, **kwargs)
    assert caught.value.param == param


async def test_ct1_heal_deletes_one_or_every_perturbation() -> None:
    client = FakeClient()
    first = await perturb.stale_view(client, user=USER, revision=5, name="a")
    await perturb.missed_events(client, group="ops", name="b")
    await perturb.missed_events(client, group="ops2", name="c")
    assert await perturb.heal(client, first) == ["a"]
    assert [o["metadata"]["name"] for o in client.objects("perturbations")] == ["b", "c"]
    assert sorted(await perturb.heal(client)) == ["b", "c"]
    assert client.objects("perturbations") == []
    assert await perturb.heal(client) == []
    with pytest.raises(ApiError):
        await perturb.heal(client, "a")
