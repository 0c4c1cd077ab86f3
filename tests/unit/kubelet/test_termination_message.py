"""The termination message kuberuntime reads after a container exits: the last 4096 bytes
of its terminationMessagePath file; with FallbackToLogsOnError, when that is empty and the
container failed, the last 80 lines of its log, at most 2048 bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.kubelet.termination import (
    falls_back_to_logs,
    termination_message,
    termination_message_path,
)


def test_lc2_the_message_file_is_read_as_written(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.write_text("Sleep expired\n")
    assert termination_message(message, tmp_path / "0.log",
                               fallback_to_logs=False) == "Sleep expired\n"


def test_lc2_a_long_message_keeps_its_last_4096_bytes(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.write_bytes(b"a" * 100 + b"b" * 4096)
    assert termination_message(message, None, fallback_to_logs=True) == "b" * 4096


def test_lc2_file_policy_never_reads_the_log(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.write_text("")
    log = tmp_path / "0.log"
    log.write_text("boom\n")
    assert termination_message(message, log, fallback_to_logs=False) == ""
    assert termination_message(None, log, fallback_to_logs=False) == ""


def test_lc2_fallback_to_logs_uses_the_log_when_the_message_is_empty(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.write_text("")
    log = tmp_path / "0.log"
    log.write_text("starting\npanic: boom\n")
    assert termination_message(message, log, fallback_to_logs=True) == (
        "starting\npanic: boom\n")
    assert termination_message(None, log, fallback_to_logs=True) == "starting\npanic: boom\n"
    message.write_text("written\n")
    assert termination_message(message, log, fallback_to_logs=True) == "written\n"


def test_lc2_fallback_to_logs_keeps_the_last_80_lines(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text("".join(f"{i}\n" for i in range(100)))
    assert termination_message(None, log, fallback_to_logs=True) == "".join(
        f"{i}\n" for i in range(20, 100))


def test_lc2_fallback_to_logs_keeps_at_most_the_last_2048_bytes(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text("x" * 5000 + "\n" + "y" * 3000 + "\n")
    got = termination_message(None, log, fallback_to_logs=True)
    assert got == ("y" * 3000 + "\n")[-2048:]


@pytest.mark.parametrize(("policy", "code", "reason", "expected"), [
    ("FallbackToLogsOnError", 1, "Error", True),
    ("FallbackToLogsOnError", 0, "Completed", False),
    ("FallbackToLogsOnError", 128, "StartError", False),
    ("File", 1, "Error", False),
    (None, 1, "Error", False),
])
def test_lc2_fallback_to_logs_only_for_a_failed_container_that_ran(
        policy: str | None, code: int, reason: str, expected: bool) -> None:
    container = {"name": "c"} if policy is None else {
        "name": "c", "terminationMessagePolicy": policy}
    assert falls_back_to_logs(container, code, reason) is expected


def test_lc2_termination_message_path_defaults_to_dev_termination_log() -> None:
    assert termination_message_path({"name": "c"}) == "/dev/termination-log"
    assert termination_message_path({"terminationMessagePath": "/tmp/msg"}) == "/tmp/msg"
    assert termination_message_path({"terminationMessagePath": ""}) is None
