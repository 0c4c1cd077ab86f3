"""`skiff up --config`: camelCase Kubernetes keys become the components' flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.cluster.config import ClusterConfig, ConfigError, to_flag


def test_section_keys_become_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("controllerManager: {nodeMonitorGracePeriod: 4s, leaderElect: false}\n"
                    "apiserver: {defaultUnreachableTolerationSeconds: 5}\n"
                    "kubelet: {nodeLeaseDurationSeconds: 4}\n")
    cfg = ClusterConfig.load(path)
    assert cfg.flags("controllerManager", tmp_path) == [
        "--node-monitor-grace-period", "4s", "--leader-elect", "false"]
    assert cfg.flags("apiserver", tmp_path) == ["--default-unreachable-toleration-seconds", "5"]
    assert cfg.flags("kubelet", tmp_path) == ["--node-lease-duration-seconds", "4"]


def test_nested_settings_go_to_a_component_config_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("scheduler:\n  profiles:\n  - schedulerName: default-scheduler\n")
    flags = ClusterConfig.load(path).flags("scheduler", tmp_path / "cfg")
    assert flags == ["--config", str(tmp_path / "cfg" / "scheduler.yaml")]
    assert "schedulerName" in (tmp_path / "cfg" / "scheduler.yaml").read_text()


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("controller: {}", "unknown section(s) controller", id="unknown-section"),
    pytest.param("- 1", "must be a map", id="not-a-map"),
    pytest.param("kubelet: [1]", "section kubelet must be a map", id="section-not-map"),
    pytest.param("a: [", "not valid YAML", id="bad-yaml"),
])
def test_bad_config_names_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ClusterConfig.load(path)


@pytest.mark.parametrize(("key", "flag"), [
    ("nodeMonitorGracePeriod", "--node-monitor-grace-period"),
    ("terminatedPodGCThreshold", "--terminated-pod-gc-threshold"),
    ("podGCQuarantineTime", "--pod-gc-quarantine-time"),
    ("defaultUnreachableTolerationSeconds", "--default-unreachable-toleration-seconds"),
])
def test_kubernetes_keys_map_to_flags(key: str, flag: str) -> None:
    assert to_flag(key) == flag
