"""How long `skiff explore` takes for a 5-step workload, and how many test runs it made.

The workload is examples/operators/database.workload.yaml (create a Database of 2
replicas, wait, sleep 2 s, patch to 3, wait) with the example operator
examples/operators/database.py as the controller under test, run exactly as a user runs
it (`skiff explore run`, a real CLI process; every run a fresh `skiff up` cluster). The
baseline, in the same process: the explore run's own reference run (one fault-free run:
cluster up, setup, controller start, steps, settle, snapshot), so the ratio says what the
plan costs in runs; the phases of each run (from report.json) say where a run's time goes.

Run: `.venv/bin/python bench/explore.py [--fixed] [--parallel N] [--reference-runs N]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "examples" / "operators" / "database.workload.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixed", action="store_true", help="the fixed operator")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--reference-runs", type=int, default=2)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="skiff-bench-explore-"))
    controller = f"{sys.executable} {ROOT / 'examples/operators/database.py'} {{namespace}} " \
                 f"--resync 1" + (" --fixed" if args.fixed else "")
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "skiff.cli.main", "explore", "run", str(WORKLOAD),
         "--controller", controller, "--out", str(out), "--parallel", str(args.parallel),
         "--reference-runs", str(args.reference_runs)],
        capture_output=True, text=True, cwd=ROOT)
    total = time.monotonic() - began
    report_file = out / "report.json"
    if not report_file.exists():
        sys.exit(f"skiff explore failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    report = json.loads(report_file.read_text())
    tests = report["tests"]
    ref_seconds = min(r["seconds"] for r in report["references"])
    runs = report["referenceRuns"] + len(tests)
    findings = sum(t["finding"] for t in tests)
    print(f"skiff explore, 5-step workload ({'fixed' if args.fixed else 'buggy'} "
          f"database operator), parallel {args.parallel}")
    print(f"  runs: {report['referenceRuns']} reference + {len(tests)} tests = {runs}; "
          f"findings: {findings}")
    print(f"  total: {total:.1f}s   one fault-free run (baseline): {ref_seconds:.1f}s   "
          f"ratio: {total / ref_seconds:.1f}x   per run: {total / runs:.1f}s")
    phases: dict[str, list[float]] = {}
    for t in tests:
        for phase, seconds in t.get("phases", {}).items():
            phases.setdefault(phase, []).append(seconds)
    print("  test-run phases (median s): " + ", ".join(
        f"{p} {sorted(v)[len(v) // 2]:.1f}" for p, v in phases.items()))


if __name__ == "__main__":
    main()
