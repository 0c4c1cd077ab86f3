"""CT2: explore's parallel runs each get a disjoint share of SKIFF_PORT_RANGE, so two
`skiff up`s started at once never pick the same port (CI saw two clusters' apiservers
fail to bind each other's ports); without a range the kernel picks every port."""

from __future__ import annotations

import pytest

from skiff.cluster.processes import PORT_RANGE_ENV, port_range
from skiff.explore.cluster import ExploreError, slot_port_ranges


def test_ct2_parallel_runs_get_disjoint_port_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, "20000-25000")
    ranges = [port_range(r) for r in slot_port_ranges(2)]
    assert ranges == [(20000, 22500), (22500, 25000)]
    ports = [set(range(low, high)) for low, high in ranges]
    assert not ports[0] & ports[1]


def test_ct2_one_slot_or_no_range_keeps_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, "20000-25000")
    assert slot_port_ranges(1) == ["20000-25000"]
    monkeypatch.delenv(PORT_RANGE_ENV)
    assert slot_port_ranges(3) == ["", "", ""]


def test_ct2_a_range_too_small_for_the_slots_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, "20000-20100")
    with pytest.raises(ExploreError, match="too small for 2 clusters at once"):
        slot_port_ranges(2)
