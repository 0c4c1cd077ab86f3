"""A pytest plugin loaded into kopf's own test run (`-p kopfreport`): it changes no test, it
writes each test's outcome and its first error to the JSON file `$SKIFF_KOPF_REPORT` names,
for test_kopf_e2e.py to assert on and print.

kopf's tests run kubectl with `capture_output=True, check=True`, so pytest shows only
"returned non-zero exit status 1"; the error kubectl printed is what says what Skiff lacks,
so for a failed subprocess the first line of its stderr is the error recorded. This module
runs in kopf's venv: it imports nothing of Skiff's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Generator

import pytest

REPORT_ENV = "SKIFF_KOPF_REPORT"
_results: dict[str, dict[str, object]] = {}


def first_error(error: BaseException) -> str:
    if isinstance(error, subprocess.CalledProcessError):
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) \
            else str(error.stderr or "")
        lines = [line for line in stderr.splitlines() if line.strip()]
        command = error.cmd if isinstance(error.cmd, str) else " ".join(map(str, error.cmd))
        return f"`{command}` exited {error.returncode}: {lines[0] if lines else '(no stderr)'}"
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        # pytest raises a group of PytestUnraisableExceptionWarning (warnings are errors in
        # kopf's suite), each caused by what was ignored: say the first cause.
        return f"{type(error).__name__} of {len(error.exceptions)}: " \
               + first_error(error.exceptions[0])
    text = f"{type(error).__name__}: {error}".splitlines()[0][:300]
    cause = error.__cause__
    if cause is not None:
        text += f" (caused by {type(cause).__name__}: {str(cause).splitlines()[0][:200]})"
    return text


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        report.user_properties.append(("first_error", first_error(call.excinfo.value)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "error": "",
                                                "seconds": 0.0})
    entry["seconds"] = round(float(str(entry["seconds"])) + report.duration, 1)
    if report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["error"] = str(report.longrepr)[-300:]
    elif report.failed and entry["outcome"] in ("passed", "skipped"):
        # A failure in the test itself is "failed"; in a fixture (setup/teardown) "error".
        entry["outcome"] = "failed" if report.when == "call" else f"error in {report.when}"
        errors = [str(v) for k, v in report.user_properties if k == "first_error"]
        entry["error"] = errors[0] if errors else str(report.longrepr).splitlines()[-1]


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=2, sort_keys=True)
