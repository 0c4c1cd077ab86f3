"""Job successPolicy rules and the pod failure back-off, as pure functions."""

from __future__ import annotations

import pytest

from skiff.controller_manager.job.policy import failure_backoff, success_policy_rule


@pytest.mark.parametrize(("rules", "completed", "matched"), [
    ([{"succeededIndexes": "0,2-3"}], {0, 2}, None),
    ([{"succeededIndexes": "0,2-3"}], {0, 2, 3}, 0),
    ([{"succeededCount": 2}], {5, 7}, 0),
    ([{"succeededIndexes": "0-4", "succeededCount": 2}], {1, 9}, None),
    ([{"succeededIndexes": "0-4", "succeededCount": 2}], {1, 4}, 0),
    ([{"succeededCount": 3}, {"succeededIndexes": "1"}], {1}, 1),
])
def test_job_success_policy_rule_matched(rules: list[dict[str, object]], completed: set[int],
                                         matched: int | None) -> None:
    assert success_policy_rule({"rules": rules}, completed) == matched


def test_job_failure_backoff_doubles_from_the_base_and_is_capped() -> None:
    delays = [failure_backoff(n, base=10.0, limit=360.0) for n in range(8)]
    assert delays == [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 360.0]
    assert failure_backoff(500, base=10.0, limit=360.0) == 360.0
