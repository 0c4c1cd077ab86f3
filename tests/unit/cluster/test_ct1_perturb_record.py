"""Issue 35 part 2's Python API (skiff.cluster.chaos.perturb): a record-only Perturbation,
`record=True` beside a stale view / missed events / crash on write, a fromWrite view —
the objects stored are what the apiserver validates — and `record` needing the gRPC
client."""

from __future__ import annotations

import pytest

from skiff.api import validate
from skiff.client.fake import FakeClient
from skiff.cluster.chaos import perturb

USER = "system:serviceaccount:shop:operator"


def test_ct1_record_spec_alone_and_beside_each_perturbation() -> None:
    assert perturb.record_spec(group="ops") == {"subject": {"group": "ops"}, "record": True}
    specs = [perturb.stale_view_spec(user=USER, lag_revisions=3, record=True),
             perturb.missed_events_spec(user=USER, types=["DELETED"], record=True),
             perturb.crash_on_write_spec(user=USER, after=2, pid=4242, record=True)]
    assert [s["record"] for s in specs] == [True, True, True]
    assert "record" not in perturb.stale_view_spec(user=USER, lag_revisions=3)
    for spec in [perturb.record_spec(user=USER), *specs]:
        assert validate(perturb.perturbation(spec, name="p", prefix="x")) == []


async def test_ct1_from_write_stale_view_is_stored_and_blamed_by_parameter() -> None:
    client = FakeClient()
    name = await perturb.stale_view(client, user=USER, from_write=1, name="own")
    stored = client.stored("perturbations", name)
    assert stored is not None
    assert stored["spec"] == {"subject": {"user": USER}, "staleView": {"fromWrite": 1}}
    assert validate(stored) == []
    with pytest.raises(perturb.PerturbationError) as bad:
        perturb.stale_view_spec(user=USER, from_write=0)
    assert bad.value.param == "from_write"
    with pytest.raises(perturb.PerturbationError) as two:
        perturb.stale_view_spec(user=USER, revision=3, from_write=1)
    assert two.value.param == "from_write"


async def test_ct1_record_is_read_through_the_apiservers_grpc_api() -> None:
    with pytest.raises(perturb.PerturbationError) as fake:
        await perturb.record(FakeClient(), "p")
    assert fake.value.param == "client"
