"""The user's invariants over a run's end state (SPEC CT2), part of `skiff explore`'s oracle:
a CEL predicate over `objects` (resource → the snapshot's objects of it, e.g.
`objects['configmaps'].size() <= 2`), evaluated with the CEL environment Skiff's admission
policies use (skiff.api.cel), or a command that exits 0 while the invariant holds. Every
way an invariant can fail to hold — false, not a bool, does not compile, cannot be
evaluated, exits non-zero, hangs — is a `Violation` with a message a user can act on,
never a traceback.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from skiff.api import cel
from skiff.api.types import Obj
from skiff.explore.snapshot import Snapshot
from skiff.explore.workload import Invariant

__all__ = ["COMMAND_TIMEOUT", "Violation", "check_invariants", "cel_objects",
           "referenced_resources"]

COMMAND_TIMEOUT = 30.0
_TAIL_LINES = 5
_TAIL_CHARS = 400


@dataclass(frozen=True)
class Violation:
    invariant: str  # its name
    message: str


def check_invariants(invariants: Sequence[Invariant], snapshot: Snapshot, *, cwd: Path,
                     env: Mapping[str, str]) -> list[Violation]:
    """The invariants that do not hold for `snapshot`, in the workload's order. Commands
    run in `cwd` with this process's environment plus `env`."""
    found = []
    for invariant in invariants:
        if invariant.cel:
            message = _check_cel(invariant.cel, snapshot)
        else:
            message = _check_command(invariant.command, cwd=cwd, env=env)
        if message is not None:
            found.append(Violation(invariant.name, message))
    return found


_REFERENCE = re.compile(r"""objects\s*\[\s*(?:'([^']+)'|"([^"]+)")\s*\]""")


def referenced_resources(invariants: Sequence[Invariant]) -> list[str]:
    """The resources CEL invariants read (`objects['pods']`), in order, once each: the
    snapshot should hold them even when the oracle does not compare them."""
    found: list[str] = []
    for invariant in invariants:
        for match in _REFERENCE.finditer(invariant.cel):
            resource = match[1] or match[2]
            if resource not in found:
                found.append(resource)
    return found


def cel_objects(snapshot: Snapshot) -> dict[str, list[Obj]]:
    """The `objects` variable: the snapshot, each `<plural>.<group>` also under its plural
    alone (`objects['databases']`) when no other resource has that plural."""
    objects = dict(snapshot)
    plurals: dict[str, list[str]] = {}
    for resource in snapshot:
        plurals.setdefault(resource.partition(".")[0], []).append(resource)
    for plural, resources in plurals.items():
        if plural not in objects and len(resources) == 1:
            objects[plural] = snapshot[resources[0]]
    return objects


def _check_cel(expression: str, snapshot: Snapshot) -> str | None:
    try:
        program = cel.compile_expression(expression, variables=["objects"])
    except cel.CelCompileError as err:
        first = (str(err).strip().splitlines() or ["?"])[0]
        return f"the CEL expression does not compile: {first}"
    try:
        result = cel.evaluate(program, {"objects": cel_objects(snapshot)})
    except cel.CelEvalError as err:
        kinds = ", ".join(sorted(snapshot)) or "none"
        return f"the CEL expression cannot be evaluated: {err} (objects has: {kinds})"
    if not isinstance(result, bool):
        return f"the CEL expression evaluates to {result!r}, not a bool"
    return None if result else f"does not hold: {expression}"


def _check_command(command: str, *, cwd: Path, env: Mapping[str, str]) -> str | None:
    try:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, env={**os.environ, **env},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
    except OSError as err:
        return f"`{command}` could not run in {cwd}: {err.strerror}"
    try:
        output, _ = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        # the whole session: a shell's children would hold the output pipe open
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return f"`{command}` did not finish in {COMMAND_TIMEOUT:g}s{_tail(output)}"
    if proc.returncode == 0:
        return None
    how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else \
        f"exited {proc.returncode}"
    return f"`{command}` {how}{_tail(output)}"


def _tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    text = " | ".join(lines[-_TAIL_LINES:])
    if len(text) > _TAIL_CHARS:
        text = "..." + text[-_TAIL_CHARS:]
    return f": {text}"
