"""Who `skiff status` names as a Lease's holder, and the --ha address spreading."""

from __future__ import annotations

import pytest

from skiff.cluster.state import Component
from skiff.cluster.status import _holds, _lease_valid
from skiff.cluster.topology import rotated

SCHEDULER_1 = Component("scheduler-1", pid=4242, address="", health="", log="")


@pytest.mark.parametrize(("holder", "holds"), [
    pytest.param("myhost_4242", True, id="client-go default identity hostname_pid"),
    pytest.param("scheduler-1", True, id="--leader-elect-identity set to the member name"),
    pytest.param("myhost_42424", False, id="another PID that ends alike"),
    pytest.param("scheduler-2", False, id="the other replica"),
])
def test_issue11_status_role_matches_the_lease_holder(holder: str, holds: bool) -> None:
    assert _holds(SCHEDULER_1, holder) is holds


def test_issue11_an_expired_lease_has_no_leader() -> None:
    assert not _lease_valid({"renewTime": "2020-01-01T00:00:00.000000Z",
                             "leaseDurationSeconds": 15})
    assert _lease_valid({"renewTime": "2999-01-01T00:00:00.000000Z",
                         "leaseDurationSeconds": 15})


def test_issue11_services_spread_over_the_apiservers() -> None:
    assert rotated(["a", "b"], 0) == ["a", "b"]
    assert rotated(["a", "b"], 1) == ["b", "a"]
    assert rotated(["a", "b"], 2) == ["a", "b"]
