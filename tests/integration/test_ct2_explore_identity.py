"""`skiff explore run --identity` end to end (SPEC CT2, issue 35 item 2: "the identity of
one already running"): the real CLI and real `skiff up --nodes 1` clusters, the in-pod
operator of examples/explore/inpod/ deployed by the workload's setup in each of them and run
by a kubelet with the node's python3 (in-cluster: its ServiceAccount's token, the apiserver
through the `kubernetes` Service). Explore starts nothing; the perturbations' subject is the
ServiceAccount. A crash test kills the operator's container through its kubelet, the
kubelet restarts it, and the correct operator ends as the reference run did — also when the
crash test is replayed from its saved file. Without --controller-pods, no crash test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# One explore at a time (each runs two clusters at once): beside the rest of the suite on
# 2 cores, more would starve the timing-sensitive tests.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900),
              pytest.mark.xdist_group("explore")]

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "examples" / "explore" / "inpod" / "workload.yaml"
SA = "system:serviceaccount:inpod:operator"
TIMINGS = ["--nodes", "1", "--hold", "1", "--quiet", "2", "--fault-wait", "5",
           "--parallel", "2"]


def _skiff(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skiff.cli.main", *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "SKIFF_SERVER": ""})


def _explore(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    proc = _skiff("explore", "run", str(WORKLOAD), "--identity", SA, "--out", str(out),
                  *TIMINGS, *extra)
    report = out / "report.json"
    assert report.exists(), proc.stdout[-6000:] + proc.stderr[-2000:]
    return proc, json.loads(report.read_text())


def test_ct2_explore_identity_crashes_the_controllers_pod_and_it_comes_back(
        tmp_path: Path) -> None:
    out = tmp_path / "inpod"
    proc, report = _explore(out, "--controller-pods", "app=inpod-operator",
                            "--max-tests", "6")
    summary = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, summary
    assert not [t for t in report["tests"] if t["finding"]], summary
    assert "no finding: every test run ended as the reference run did" in proc.stdout
    assert f"identity {SA}" in proc.stdout
    crashes = [t for t in report["tests"] if t["kind"] == "crash"]
    assert crashes and {t["kind"] for t in report["tests"]} == {
        "stale-view", "missed-event", "crash"}, summary
    for test in crashes:
        run = out / "runs" / test["id"]
        entries = json.loads((run / "record.json").read_text())
        fired = [e for e in entries if e.get("op") == "crash"]
        assert len(fired) == 1 and fired[0]["killed"] is True, fired
        assert fired[0]["target"].startswith("pod inpod/inpod-operator-"), fired
        assert "killed container operator" in fired[0]["message"], fired
        # it came back: the restarted container lists again as the operator's identity
        assert any(e.get("op") == "read" and e.get("verb") == "list"
                   and e["seq"] > fired[0]["seq"] for e in entries), entries
        log = (run / "controller.log").read_text()
        assert "--- container operator: restartCount 1" in log, log
        assert test["exits"] == [], test  # our kill is not an exit of its own
    # the reference runs' pods never restarted
    for ref in ("reference-1", "reference-2"):
        log = (out / "runs" / ref / "controller.log").read_text()
        assert "--- container operator: restartCount 0" in log, log
    # the saved crash test replays as this form (identity and pods from reference.json)
    again = _skiff("explore", "replay", str(out / "tests" / f"{crashes[0]['id']}.json"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no divergence this time" in again.stdout
    replays = [p for p in (out / "runs").iterdir() if "-replay-" in p.name]
    assert len(replays) == 1
    fired = [e for e in json.loads((replays[0] / "record.json").read_text())
             if e.get("op") == "crash"]
    assert [e["killed"] for e in fired] == [True], fired


def test_ct2_explore_identity_without_controller_pods_plans_no_crash_test(
        tmp_path: Path) -> None:
    proc, report = _explore(tmp_path / "nopods", "--reference-runs", "1", "--max-tests", "2")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert ("no crash tests: without --controller-pods explore does not know which pod is "
            "the controller") in proc.stdout
    assert report["tests"] and all(t["kind"] != "crash" for t in report["tests"])
