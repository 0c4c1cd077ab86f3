"""Settings by flag, env var or config key, with Kubernetes durations."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from skiff.settings import camel_to_field, duration, load_settings, parse_duration, setting


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("40s", 40.0, id="seconds"),
    pytest.param("500ms", 0.5, id="millis"),
    pytest.param("1m30s", 90.0, id="compound"),
    pytest.param("2h", 7200.0, id="hours"),
    pytest.param("2.5", 2.5, id="plain-number"),
    pytest.param(3, 3.0, id="int"),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "4x", "s", "4s5", "-"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_camel_case_config_keys_map_to_fields() -> None:
    assert camel_to_field("nodeMonitorGracePeriod") == "node_monitor_grace_period"


@dataclass(frozen=True)
class _Demo:
    node_monitor_grace_period: float = duration(40.0)
    workers: int = setting(5)
    leader_elect: bool = setting(True)


def test_flags_then_env_then_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKIFF_DEMO_WORKERS", "7")
    got = load_settings(_Demo, ["--node-monitor-grace-period", "4s", "--leader-elect=false"],
                        prog="demo", env_prefix="SKIFF_DEMO_")
    assert got == _Demo(node_monitor_grace_period=4.0, workers=7, leader_elect=False)


def test_bad_value_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_settings(_Demo, ["--workers", "many"], prog="demo", env_prefix="SKIFF_DEMO_")
    assert "--workers" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["skiff.apiserver", "skiff.scheduler",
                                    "skiff.controller_manager", "skiff.kubelet"])
def test_every_service_prints_help(module: str) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--log-level" in result.stdout and "Traceback" not in result.stderr
