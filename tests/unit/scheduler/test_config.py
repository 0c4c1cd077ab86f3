"""KubeSchedulerConfiguration: profiles, plugin enable/disable and weights, pluginConfig,
`disablePreemption`, `percentageOfNodesToScore`, and errors that name the field."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from skiff.scheduler.app import effective_settings
from skiff.scheduler.config import ConfigError, load_config, parse_config
from skiff.scheduler.framework.interface import Plugin
from skiff.scheduler.settings import SchedulerSettings, parse_settings
from tests.unit.scheduler.helpers import make_env


def _names(plugins: Sequence[Plugin]) -> list[str]:
    return [p.name for p in plugins]


def test_default_profile_has_kubernetes_plugins_and_weights() -> None:
    env = make_env([])
    assert _names(env.fwk.filter_plugins) == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
        "NodeResourcesFit", "VolumeRestrictions", "PodTopologySpread", "InterPodAffinity"]
    # Kubernetes 1.32's default profile weights.
    assert {p.name: w for p, w in env.fwk.score_plugins} == {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
        "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1}
    assert _names(env.fwk.post_filter_plugins) == ["DefaultPreemption"]


def test_plugins_can_be_disabled_and_reweighted() -> None:
    env = make_env([], config={"profiles": [{"plugins": {
        "score": {"disabled": [{"name": "*"}],
                  "enabled": [{"name": "PodTopologySpread", "weight": 5}]},
        "filter": {"disabled": [{"name": "TaintToleration"}]},
        "postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]})
    assert {p.name: w for p, w in env.fwk.score_plugins} == {"PodTopologySpread": 5}
    assert "TaintToleration" not in _names(env.fwk.filter_plugins)
    assert env.fwk.post_filter_plugins == []


def test_profiles_and_percentage(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podInitialBackoffSeconds: 2
profiles:
- schedulerName: default-scheduler
- schedulerName: spread-scheduler
  percentageOfNodesToScore: 50
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway
""")
    config = load_config(str(path))
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler",
                                                           "spread-scheduler"]
    assert config.percentage_of_nodes_to_score == 30
    assert config.profiles[1].percentage_of_nodes_to_score == 50
    settings = effective_settings(SchedulerSettings(), initial=2.0, maximum=None)
    assert settings.pod_initial_backoff_seconds == 2.0
    assert effective_settings(parse_settings(["--pod-initial-backoff-seconds", "0.2"]),
                              initial=2.0, maximum=None).pod_initial_backoff_seconds == 0.2


@pytest.mark.parametrize(("doc", "message"), [
    pytest.param({"kind": "Pod"}, "kind: Invalid value", id="kind"),
    pytest.param({"percentageOfNodesToScore": 101}, "not in valid range", id="percentage"),
    pytest.param({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
                 "Duplicate value", id="duplicate-profile"),
    pytest.param({"profiles": [{"pluginConfig": [{"args": {}}]}]},
                 r"pluginConfig\[0\].name: Required value", id="plugin-config-name"),
])
def test_bad_config_names_the_field(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(doc)


def test_unknown_plugin_is_refused() -> None:
    with pytest.raises(ConfigError, match="plugin 'Nope' is not registered"):
        make_env([], config={"profiles": [{"plugins": {"filter": {
            "enabled": [{"name": "Nope"}]}}}]})


def test_settings_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKIFF_SCHEDULER_POD_MAX_BACKOFF_SECONDS", "3s")
    settings = parse_settings(["--scheduler-name", "mine", "--percentage-of-nodes-to-score",
                               "20"])
    assert (settings.scheduler_name, settings.percentage_of_nodes_to_score,
            settings.pod_max_backoff_seconds, settings.pod_initial_backoff_seconds) == (
        "mine", 20, 3.0, 1.0)
