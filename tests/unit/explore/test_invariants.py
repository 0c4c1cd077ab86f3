"""A `skiff explore` workload's invariants over a run's end state (SPEC CT2): a CEL predicate
over `objects` or a command; one that does not hold, does not compile, is not a bool or
cannot run is a Violation with a one-line message, never an exception."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skiff.explore import invariants
from skiff.explore.invariants import Violation, check_invariants, referenced_resources
from skiff.explore.snapshot import Snapshot
from skiff.explore.workload import Invariant

SNAPSHOT: Snapshot = {"configmaps": [
    {"metadata": {"name": "a", "labels": {"examples.skiff.io/backup": "b1"}}},
    {"metadata": {"name": "b"}}]}
ONE_JOB = ("objects['configmaps'].filter(c, has(c.metadata.labels) && "
           "'examples.skiff.io/backup' in c.metadata.labels).size() <= 1")


def check(*invariants: Invariant, cwd: Path = Path("."),
          env: dict[str, str] | None = None) -> list[Violation]:
    return check_invariants(invariants, SNAPSHOT, cwd=cwd, env=env or {})


def test_ct2_a_cel_invariant_that_holds() -> None:
    assert check(Invariant("one job per backup", cel=ONE_JOB)) == []


@pytest.mark.parametrize(("cel", "message"), [
    pytest.param("objects['configmaps'].size() == 1",
                 "does not hold: objects['configmaps'].size() == 1", id="false"),
    pytest.param("objects['configmaps'].size() ==",
                 "the CEL expression does not compile: ERROR: <input>:1:", id="broken"),
    pytest.param("objects['configmaps'].size()",
                 "the CEL expression evaluates to 2, not a bool", id="not a bool"),
    pytest.param("objects['pods'].size() == 0",
                 "the CEL expression cannot be evaluated: no such key: pods "
                 "(objects has: configmaps)", id="not in the snapshot"),
])
def test_ct2_a_cel_invariant_that_fails(cel: str, message: str) -> None:
    (violation,) = check(Invariant("mine", cel=cel), Invariant("fine", cel="true"))
    assert violation.invariant == "mine"
    assert violation.message.startswith(message), violation.message
    assert "\n" not in violation.message


def test_ct2_a_command_invariant(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text(
        "import os, sys\nprint('checking', os.environ['SKIFF_EXPLORE_NAMESPACE'])\n"
        "sys.exit(0 if os.environ['SKIFF_EXPLORE_NAMESPACE'] == 'demo' else 4)\n")
    command = f"{sys.executable} check.py"
    assert check(Invariant("holds", command=command), cwd=tmp_path,
                 env={"SKIFF_EXPLORE_NAMESPACE": "demo"}) == []
    (violation,) = check(Invariant("fails", command=command), cwd=tmp_path,
                         env={"SKIFF_EXPLORE_NAMESPACE": "prod"})
    assert violation == Violation("fails", f"`{command}` exited 4: checking prod")


def test_ct2_a_command_that_cannot_run(tmp_path: Path) -> None:
    (violation,) = check(Invariant("x", command="./no-such-script"), cwd=tmp_path)
    assert violation.message.startswith("`./no-such-script` exited 127: ")
    (violation,) = check(Invariant("x", command="true"), cwd=tmp_path / "missing")
    assert violation.message.startswith(f"`true` could not run in {tmp_path / 'missing'}")


def test_ct2_a_command_that_hangs_is_stopped(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invariants, "COMMAND_TIMEOUT", 0.5)
    (violation,) = check(Invariant("x", command="echo started; sleep 30"), cwd=tmp_path)
    assert violation.message == "`echo started; sleep 30` did not finish in 0.5s: started"


def test_ct2_a_cel_invariant_reads_a_custom_resource_by_its_plural() -> None:
    snapshot: Snapshot = {"databases.examples.skiff.io": [{"spec": {"replicas": 3}}],
                          "configmaps": []}
    holds = Invariant("x", cel="objects['databases'].all(d, d.spec.replicas <= 3) && "
                               "objects['databases.examples.skiff.io'].size() == 1")
    assert check_invariants([holds], snapshot, cwd=Path("."), env={}) == []


def test_ct2_the_resources_invariants_read() -> None:
    assert referenced_resources([
        Invariant("a", cel="objects['pods'].size() < objects[\"configmaps\"].size()"),
        Invariant("b", cel="objects[ 'pods' ].size() > 0"),
        Invariant("c", command="objects['secrets']")]) == ["pods", "configmaps"]
