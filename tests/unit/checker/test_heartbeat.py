"""The heartbeat workload and the report command, as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_heartbeat_appends_lines_to_the_log_and_volume_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    log, volume = tmp_path / "beats.log", tmp_path / "volume"
    proc = subprocess.Popen(
        [sys.executable, "-m", "skiff.checker.heartbeat", "--log", str(log), "--volume",
         str(volume), "--interval", "0.05"],
        env={**os.environ, "POD_NAME": "web-0", "POD_UID": "uid-1"})
    try:
        deadline = time.monotonic() + 10
        while (not log.exists() or len(log.read_text().splitlines()) < 3) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) >= 3
    assert {(b["identity"], b["uid"], b["pid"]) for b in lines} == {("web-0", "uid-1",
                                                                      proc.pid)}
    monos = [b["mono"] for b in lines]
    assert monos == sorted(monos)
    assert (volume / "heartbeats").read_text().splitlines()[0] == log.read_text(
        ).splitlines()[0]


def _beat(uid: str, mono: float) -> str:
    return json.dumps({"identity": "web-0", "uid": uid, "pid": 1, "mono": mono,
                       "wall": mono})


def test_report_exits_non_zero_on_an_overlap(tmp_path: Path) -> None:
    clean, bad = tmp_path / "clean.log", tmp_path / "bad.log"
    clean.write_text("\n".join([_beat("a", 1), _beat("a", 2), _beat("b", 3)]) + "\n")
    bad.write_text("\n".join([_beat("a", 1), _beat("a", 3), _beat("b", 2),
                              _beat("b", 4)]) + "\n")
    report = [sys.executable, "-m", "skiff.checker.report"]
    ok = subprocess.run([*report, str(clean)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "0 overlapping execution(s)" in ok.stdout
    found = subprocess.run([*report, str(bad)], capture_output=True, text=True, check=False)
    assert found.returncode == 1
    assert "OVERLAP web-0: a and b both alive for 1.000s" in found.stdout
