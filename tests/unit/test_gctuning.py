"""skiff.gctuning: services collect cyclic garbage at their own pace, SKIFF_GC_THRESHOLD
changes it, and a malformed value falls back to the default instead of failing start-up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from skiff.gctuning import DEFAULT_THRESHOLD, tune_gc


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.parametrize(("value", "expected"), [
    ("", DEFAULT_THRESHOLD),
    ("700,10,10", (700, 10, 10)),
    ("not,a,number", DEFAULT_THRESHOLD),
])
def test_gc_pace_follows_skiff_gc_threshold(monkeypatch: pytest.MonkeyPatch, value: str,
                                            expected: tuple[int, int, int]) -> None:
    monkeypatch.setenv("SKIFF_GC_THRESHOLD", value)
    tune_gc()
    assert gc.get_threshold() == expected
    assert gc.get_freeze_count() > 0  # start-up's heap is out of the collector's walk
