"""A whole exploration: the reference runs (fault-free; two by default, so fields that
differ between them — random data the controller writes — are masked), the plan derived
from the first one's record, each test in a fresh cluster (`parallel` at a time), and the
files a user keeps: `reference.json` and one `tests/<id>.json` per test, which is what
`skiff explore replay` runs again, alone, against the same reference.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skiff.api.types import Obj
from skiff.explore.cluster import ExploreError, slot_port_ranges
from skiff.explore.driver import Options, RunResult, run_once
from skiff.explore.oracle import Mask, learn_mask
from skiff.explore.plan import KINDS, Trial, make_plan
from skiff.explore.record import Trace
from skiff.explore.snapshot import Snapshot

__all__ = ["Outcome", "explore", "replay"]


@dataclass
class Outcome:
    opts: Options
    references: list[RunResult]
    plan: list[Trial]
    results: list[RunResult] = field(default_factory=list)
    mask: Mask = field(default_factory=lambda: Mask(frozenset()))
    seconds: float = 0.0

    @property
    def findings(self) -> list[RunResult]:
        return [r for r in self.results if r.diverged]


def _save_reference(out: Path, opts: Options, ref: RunResult, mask: Mask) -> Path:
    path = out / "reference.json"
    path.write_text(json.dumps({
        "options": opts.to_json(), "entries": ref.entries, "startSeq": ref.start_seq,
        "snapshot": ref.snapshot, "mask": sorted([list(p) for p in mask.paths])}, indent=1))
    return path


def _save_test(out: Path, test: Trial) -> Path:
    path = out / "tests" / f"{test.id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"reference": "../reference.json", "test": test.to_json()},
                               indent=2))
    return path


def _reference_problem(ref: RunResult) -> str:
    if ref.step_error:
        return f"the reference run (no fault) failed at {ref.step_error}; fix the workload " \
               f"or the controller first (its output: {ref.log})"
    if ref.exits:
        return f"without any fault, {ref.exits[0].text()}"
    if not ref.settled:
        return "without any fault, the controller never stopped writing (raise --quiet or " \
               "--settle-timeout if it is only slow)"
    if ref.violations:
        return f"without any fault, invariant {ref.violations[0].invariant!r} fails: " \
               f"{ref.violations[0].message}"
    return ""


async def explore(opts: Options, *, parallel: int = 1, max_tests: int = 20,
                  kinds: Sequence[str] = KINDS, reference_runs: int = 2,
                  echo: Callable[[str], None] = print) -> Outcome:
    began = time.monotonic()
    opts.out.mkdir(parents=True, exist_ok=True)
    stopping: list[Callable[[], None]] = []
    try:
        references: list[RunResult] = []
        pki: Path | None = None
        for i in range(1, reference_runs + 1):
            echo(f"reference run {i}/{reference_runs} (no fault)...")
            ref = await run_once(opts, f"reference-{i}", test=None, pki=pki, reference=None,
                                 stopping=stopping)
            pki = opts.out / "runs" / "reference-1" / "cluster" / "pki"
            problem = _reference_problem(ref)
            if problem:
                raise ExploreError(problem)
            references.append(ref)
            echo(f"  {len(ref.trace.writes())} writes, {len(ref.trace.events())} events "
                 f"delivered, {sum(len(v) for v in ref.snapshot.values())} objects compared "
                 f"({ref.seconds:.1f}s)")
        first = references[0]
        mask = learn_mask([r.snapshot for r in references])
        _save_reference(opts.out, opts, first, mask)
        plan = make_plan(first.trace, step_times=first.step_times, kinds=kinds,
                         max_tests=max_tests)
        outcome = Outcome(opts, references, plan, mask=mask)
        echo(f"test plan: {len(plan)} run{'s' if len(plan) != 1 else ''} "
             f"({', '.join(f'{sum(t.kind == k for t in plan)} {k}' for k in kinds)})")
        # one port range per slot: clusters started at once never pick the same port
        slots: asyncio.Queue[str] = asyncio.Queue()
        for ports in slot_port_ranges(max(1, parallel)):
            slots.put_nowait(ports)
        reference = (first.trace, first.snapshot, mask)

        async def one(test: Trial) -> RunResult:
            _save_test(opts.out, test)
            ports = await slots.get()
            try:
                result = await run_once(opts, test.id, test=test, pki=pki,
                                        reference=reference, stopping=stopping, echo=echo,
                                        ports=ports)
            finally:
                slots.put_nowait(ports)
            echo(f"  {test.id} {'FINDING' if result.diverged else 'ok':8} {test.title} "
                 f"({result.seconds:.1f}s)")
            return result

        # A run that fails (ExploreError) cancels the others, whose clusters are stopped
        # before the error is reported (their stops are waited for below).
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(t)) for t in plan]
        except BaseExceptionGroup as failed:
            first_error = failed.exceptions[0]
            raise first_error from None
        outcome.results = [t.result() for t in tasks]
        outcome.seconds = time.monotonic() - began
        return outcome
    finally:
        await asyncio.to_thread(lambda: [wait() for wait in stopping])


def load_reference(path: Path) -> tuple[Options, Trace, Snapshot, Mask, Obj]:
    from skiff.explore.workload import load_workload

    data = json.loads(path.read_text())
    o = data["options"]
    opts = Options(workload=load_workload(Path(o["workload"])), controller=o["controller"],
                   user=o["user"], groups=tuple(o["groups"]), nodes=int(o["nodes"]),
                   cluster_config=Path(o["clusterConfig"]) if o["clusterConfig"] else None,
                   out=path.parent, ready_timeout=float(o["readyTimeout"]),
                   hold=float(o["hold"]), quiet=float(o["quiet"]),
                   settle_timeout=float(o["settleTimeout"]),
                   fault_wait=float(o.get("faultWait", 10.0)),
                   cwd=Path(o.get("cwd") or Path.cwd()), identity=str(o.get("identity") or ""),
                   controller_pods=str(o.get("controllerPods") or ""))
    mask = Mask(frozenset((str(a), str(b)) for a, b in data["mask"]))
    return (opts, Trace(data["entries"], start_seq=int(data["startSeq"])),
            data["snapshot"], mask, data)


async def replay(test_file: Path, *, echo: Callable[[str], None] = print) -> RunResult:
    """Run the test saved in `test_file` again, once, against its saved reference."""
    try:
        saved = json.loads(test_file.read_text())
        ref_path = (test_file.parent / saved["reference"]).resolve()
        test = Trial.from_json(saved["test"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ExploreError(f"{test_file}: not a test saved by `skiff explore` ({err})") \
            from None
    opts, trace, snapshot, mask, _ = load_reference(ref_path)
    name = f"{test.id}-replay-{time.strftime('%H%M%S')}"
    echo(f"replaying {test.id}: {test.title}")
    return await run_once(opts, name, test=test, pki=ref_path.parent / "runs" /
                          "reference-1" / "cluster" / "pki",
                          reference=(trace, snapshot, mask))
