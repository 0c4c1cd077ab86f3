"""What `skiff explore` tells a user: a summary table (one line per test run) and, for each
finding, the fault, the controller's decision that went wrong (from the record), the end
state's differences from the reference run, broken invariants, the controller's own
exits, and the one command that replays exactly that test. The same text goes to the
terminal and to `report.md`; `report.json` carries it for tools.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from skiff.api.types import Obj
from skiff.explore.driver import RunResult
from skiff.explore.session import Outcome

__all__ = ["finding_lines", "render", "replay_command", "write_reports"]


def replay_command(out: Path, result: RunResult) -> str:
    assert result.test is not None
    return f"skiff explore replay {shlex.quote(str(out / 'tests' / f'{result.test.id}.json'))}"


def finding_lines(result: RunResult, *, replay: str = "") -> list[str]:
    """The lines of one finding (a run that diverged from the reference run)."""
    test = result.test
    lines = [f"{result.name}: {test.title if test else 'reference run'}"]
    if test is not None:
        lines.append(f"  perturbation: {json.dumps(test.spec, sort_keys=True)}"
                     if test.before_step < 0 else
                     f"  perturbation: the controller's view pinned at the head revision "
                     f"right before step {test.before_step}, until the steps ended")
        lines.append(f"  reference decision perturbed: {test.point}")
    lines += [f"  {line}" for line in result.explanation]
    if result.step_error:
        lines.append(f"  workload: {result.step_error}")
    lines += [f"  note: {note}" for note in result.notes]
    for d in result.differences:
        lines.append(f"  end state: {d.text}")
    for v in result.violations:
        lines.append(f"  invariant {v.invariant!r} broken: {v.message}")
    for e in result.exits:
        lines += [f"  {line}" for line in e.text().splitlines()]
    if not result.settled:
        lines.append("  the controller kept writing after the fault healed (never settled)")
    if result.log is not None:
        lines.append(f"  controller output: {result.log}")
    if replay:
        lines.append(f"  replay: {replay}")
    return lines


def _status(result: RunResult) -> str:
    if not result.diverged:
        return "ok"
    first = (result.differences[0].text if result.differences else
             result.step_error or (result.violations[0].message if result.violations else "")
             or (result.exits[0].text().splitlines()[0] if result.exits else "")
             or "never settled")
    return f"FINDING: {first}"


def render(outcome: Outcome) -> str:
    """The whole report as text."""
    out = outcome.opts.out
    found = outcome.findings
    lines = [f"skiff explore: {outcome.opts.controller}",
             f"workload: {outcome.opts.workload.path} ({len(outcome.opts.workload.steps)} "
             f"steps), identity {outcome.opts.user}",
             f"{len(outcome.references)} reference run(s), {len(outcome.results)} test "
             f"run(s), {outcome.seconds:.0f}s; {len(found)} finding"
             f"{'s' if len(found) != 1 else ''}", ""]
    rows = [("ID", "KIND", "PERTURBATION", "RESULT", "TIME")]
    for r in outcome.results:
        assert r.test is not None
        rows.append((r.test.id, r.test.kind, r.test.title, _status(r), f"{r.seconds:.1f}s"))
    widths = [min(max(len(row[i]) for row in rows), 70) for i in range(4)]
    for row in rows:
        cells = [row[i][:70].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join(cells + [row[4]]).rstrip())
    for r in found:
        lines += ["", *finding_lines(r, replay=replay_command(out, r))]
    if not found:
        lines += ["", "no finding: every test run ended as the reference run did"]
    return "\n".join(lines)


def _json(outcome: Outcome) -> Obj:
    return {
        "controller": outcome.opts.controller, "workload": str(outcome.opts.workload.path),
        "seconds": round(outcome.seconds, 1), "referenceRuns": len(outcome.references),
        "references": [{"name": r.name, "seconds": round(r.seconds, 1), "phases": r.phases}
                       for r in outcome.references],
        "tests": [{
            "id": r.test.id if r.test else r.name, "kind": r.test.kind if r.test else "",
            "title": r.test.title if r.test else "", "finding": r.diverged,
            "seconds": round(r.seconds, 1), "phases": r.phases,
            "explanation": r.explanation,
            "differences": [d.text for d in r.differences], "notes": r.notes,
            "violations": [{"invariant": v.invariant, "message": v.message}
                           for v in r.violations],
            "exits": [e.code for e in r.exits], "settled": r.settled,
            "replay": replay_command(outcome.opts.out, r)} for r in outcome.results]}


def write_reports(outcome: Outcome) -> tuple[Path, Path]:
    out = outcome.opts.out
    md = out / "report.md"
    md.write_text("```\n" + render(outcome) + "\n```\n")
    js = out / "report.json"
    js.write_text(json.dumps(_json(outcome), indent=2))
    return md, js
