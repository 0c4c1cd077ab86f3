"""`skiff check history`'s arguments: durations as users write them, refused when not."""

from __future__ import annotations

import argparse

import pytest

from skiff.cli.checkhistory import parse_duration
from skiff.cli.main import build_parser


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30.0), ("2m", 120.0), ("1.5", 1.5),
                                               ("500ms", 0.5)])
def test_durations_are_read_as_users_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-3s", "ten", "5d"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        parse_duration(text)


def test_the_cli_parses_check_history() -> None:
    args = build_parser().parse_args(["check", "history", "--duration", "10s", "--keys", "3",
                                      "--workers", "2"])
    assert (args.duration, args.keys, args.workers, args.namespace) == (10.0, 3, 2, "default")
