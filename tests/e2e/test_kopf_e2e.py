"""SPEC EX9: kopf's own e2e suite, at its release tag and unchanged, against `skiff up`.

kopf (the Kubernetes Operator Pythonic Framework) tests itself by running each of its
example operators for real (`kopf run` in-process through `KopfRunner`) while kubectl
applies its example CRD and object, creates and deletes them; the framework's log must show
the handlers ran once each, finalizers added and removed, no tracebacks. The run here is the
command of kopf's CI (`pytest --timeout=30 --only-e2e` in its source tree) in a venv of its
own (tests/e2e/thirdparty.py), with KUBECONFIG naming the cluster `skiff up` wrote. The
only addition is a reporting plugin (tests/e2e/kopfreport.py) that records each test's
outcome and first error; the outcomes are asserted here: every test passes except those in
EXPECTED_FAILURES, each with the reason no cluster here can pass it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e import kopfreport
from tests.e2e.thirdparty import HERE, KopfSuite, kopf_suite

pytestmark = [pytest.mark.integration]

# 14 examples that tests/e2e/test_examples.py runs, and 3 examples with tests of their own.
KOPF_E2E_TESTS = 17

# kopf e2e test ids that may fail here, each with why no cluster here can pass it.
EXPECTED_FAILURES: dict[str, str] = {}


def _summary(results: dict[str, dict[str, object]]) -> str:
    return "\n".join(f"{r['outcome']:<8} {r['seconds']:>6}s  {test}"
                     + (f"\n           {r['error']}" if r["error"] else "")
                     for test, r in sorted(results.items()))


# Failures that are not the cluster's, each of which makes a test run again, alone, up to
# RERUNS times (it must pass then; any other failure counts at once):
# - a socket or transport its client left unclosed when KopfRunner closed the operator's
#   event loop (kopf's suite turns that ResourceWarning into an error): the TLS close of a
#   connection to the apiserver had not been answered yet, a race in the test's teardown
#   that any server loses now and then under load (Skiff answers a close_notify in ~150 us
#   median, a bare aiohttp server in ~105 us, on this machine);
# - CPython's spurious "AST constructor recursion depth mismatch" SystemError when ast is
#   used from two threads at once (python/cpython#106905; KopfRunner runs the operator in a
#   thread while pytest parses in the main one).
# CI saw the CPython error hit kopf's 13-hooks example on a run of its own too (it formats
# tracebacks in the operator's thread while pytest does in the main one): up to 3 runs more.
RERUNS = 3
NOT_THE_CLUSTERS = (("PytestUnraisableExceptionWarning", "ResourceWarning: unclosed"),
                    ("SystemError: AST constructor recursion depth mismatch",))


def _not_the_clusters(error: object) -> bool:
    return any(all(text in str(error) for text in texts) for texts in NOT_THE_CLUSTERS)


def _run(suite: KopfSuite, env: dict[str, str], report: Path, log: Path,
         tests: list[str]) -> dict[str, dict[str, object]]:
    """kopf's CI command (or only `tests`) in its source tree; each test's outcome."""
    with open(log, "w") as out:
        run = subprocess.run(
            [str(suite.python), "-m", "pytest", "--color=no", "--timeout=30", "--only-e2e",
             "-p", "kopfreport", "-p", "no:cacheprovider", "-q", "-rfE", *tests],
            cwd=suite.source, env={**env, kopfreport.REPORT_ENV: str(report)}, stdout=out,
            stderr=subprocess.STDOUT, timeout=840)
    assert report.exists(), f"kopf's pytest exited {run.returncode} without a report; see {log}"
    results: dict[str, dict[str, object]] = json.loads(report.read_text())
    return results


@pytest.mark.timeout(1200)  # the suite takes 4-6 minutes; the venv ~30 s on a fresh machine
def test_ex9_kopf_e2e_suite_passes_against_skiff_up(skiff_kubeconfig: Path,
                                                     tmp_path: Path) -> None:
    suite = kopf_suite()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(KUBECONFIG=str(skiff_kubeconfig), PYTHONPATH=str(HERE))
    results = _run(suite, env, tmp_path / "kopf-e2e.json", tmp_path / "kopf-e2e.log", [])
    print(f"kopf {suite.source.name} e2e against skiff up:\n{_summary(results)}")
    assert len(results) == KOPF_E2E_TESTS, _summary(results)
    for attempt in range(RERUNS):
        raced = sorted(test for test, r in results.items()
                       if r["outcome"] != "passed" and test not in EXPECTED_FAILURES
                       and _not_the_clusters(r["error"]))
        if not raced:
            break
        again = _run(suite, env, tmp_path / f"kopf-e2e-again-{attempt}.json",
                     tmp_path / f"kopf-e2e-again-{attempt}.log", raced)
        print(f"run again (a failure that is not the cluster's):\n{_summary(again)}")
        for test in raced:
            results[test] = {**again.get(test, {"outcome": "missing", "error": "",
                                                "seconds": 0}),
                             "first": results[test]["error"]}
    not_passed = {test for test, r in results.items() if r["outcome"] != "passed"}
    assert not_passed == set(EXPECTED_FAILURES), (
        f"kopf e2e: {len(results) - len(not_passed)} of {len(results)} passed\n"
        f"{_summary(results)}")
