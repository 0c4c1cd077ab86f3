"""The per-group rules add up to one table per concern: every served kind is validated by
exactly one group, and a kind claimed twice is refused."""

from __future__ import annotations

import pytest

from skiff.api import catalog
from skiff.api.kinds import KINDS


def test_every_served_kind_has_a_validator_from_one_group() -> None:
    served = {info.kind for info in KINDS}
    assert served == set(catalog.VALIDATORS)
    claims = [kind for group in catalog.GROUPS for kind in group.validators]
    assert len(claims) == len(set(claims))


def test_the_other_tables_only_name_served_kinds() -> None:
    served = {info.kind for info in KINDS}
    for table in (catalog.DEFAULTERS, catalog.COLUMNS, catalog.WIDE, catalog.SCHEMAS,
                  catalog.INITIAL_STATUS):
        assert set(table) <= served
    assert {kind for _, kind in catalog.VERSION_SCHEMAS} <= served


def test_a_kind_in_two_groups_is_refused() -> None:
    with pytest.raises(ValueError, match="Pod has rules in two API groups"):
        catalog._merge([{"Pod": 1}, {"Pod": 2}])
