"""The at-most-one checker's arithmetic (SPEC SC2): overlaps and time to first heartbeat."""

from __future__ import annotations

import json

import pytest

from skiff.checker.report import Overlap, overlaps, time_to_first_heartbeat


def beats(identity: str, uid: str, *times: float) -> list[str]:
    return [json.dumps({"identity": identity, "uid": uid, "pid": 1, "mono": t, "wall": t})
            for t in times]


@pytest.mark.parametrize(("lines", "expected"), [
    pytest.param(beats("web-0", "a", 1, 2, 3), [], id="one-uid-never-overlaps"),
    pytest.param(beats("web-0", "a", 1, 2) + beats("web-0", "b", 3, 4), [],
                 id="replacement-after-the-old-one"),
    pytest.param(beats("web-0", "a", 1, 2.05) + beats("web-0", "b", 2.0, 3), [],
                 id="within-one-interval-is-tolerated"),
    pytest.param(beats("web-0", "a", 1, 3) + beats("web-0", "b", 2, 4),
                 [Overlap("web-0", ("a", "b"), 2, 3)], id="two-uids-alive-at-once"),
    pytest.param(beats("web-0", "a", 1, 10) + beats("web-0", "b", 2, 3),
                 [Overlap("web-0", ("a", "b"), 2, 3)], id="second-inside-the-first"),
    pytest.param(beats("web-0", "a", 1, 3) + beats("web-1", "b", 2, 4), [],
                 id="different-identities-may-overlap"),
    pytest.param(beats("web-0", "a", 1, 5) + beats("web-0", "b", 2, 3)
                 + beats("web-0", "c", 4, 6),
                 [Overlap("web-0", ("a", "b"), 2, 3), Overlap("web-0", ("a", "c"), 4, 5)],
                 id="every-pair-reported"),
    pytest.param(beats("web-0", "a", 1, 3) + ['{"identity": "web-0", "uid": "b", "pi'],
                 [], id="torn-last-line-skipped"),
])
def test_overlaps(lines: list[str], expected: list[Overlap]) -> None:
    assert overlaps(lines) == expected


@pytest.mark.parametrize(("lines", "after", "expected"), [
    pytest.param(beats("web-0", "a", 1, 2) + beats("web-0", "b", 7, 8), 2.5, 4.5,
                 id="replacement"),
    pytest.param(beats("web-0", "a", 1, 2, 3, 4), 2.5, None, id="old-one-still-beating"),
    pytest.param(beats("web-0", "a", 1, 2) + beats("web-1", "b", 7), 2.5, None,
                 id="other-identity"),
])
def test_time_to_first_heartbeat(lines: list[str], after: float,
                                 expected: float | None) -> None:
    assert time_to_first_heartbeat(lines, "web-0", after) == expected
