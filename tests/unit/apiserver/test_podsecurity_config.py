"""SPEC AU7: the cluster-wide Pod Security default and exemptions come from the
PodSecurity entry of the AdmissionConfiguration in `--admission-control-config-file`."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.api.podsecurity import BASELINE, RESTRICTED, LevelVersion, PodSecurityConfig, Policy
from skiff.apiserver.app import parse_settings, pod_security_config

POD_SECURITY = """\
apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  warn: restricted
  warn-version: v1.29
exemptions:
  usernames: [ops]
  runtimeClasses: [kata]
  namespaces: [kube-system]
"""


def admission(plugin: str) -> str:
    return ("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
            f"plugins:\n{plugin}")


def settings(tmp_path: Path, text: str, *extra: str) -> PodSecurityConfig | None:
    path = tmp_path / "admission.yaml"
    path.write_text(text)
    return pod_security_config(parse_settings(
        ["--admission-control-config-file", str(path), *extra]))


EXPECTED = PodSecurityConfig(
    Policy(enforce=LevelVersion(BASELINE), warn=LevelVersion(RESTRICTED, 29)))


def test_au7_inline_pod_security_configuration(tmp_path: Path) -> None:
    inline = "\n".join("    " + line for line in POD_SECURITY.splitlines())
    config = settings(tmp_path, admission(f"- name: PodSecurity\n  configuration:\n{inline}\n"))
    assert config is not None
    assert config.defaults == EXPECTED.defaults
    assert config.exemptions.usernames == ("ops",)
    assert config.exemptions.runtime_classes == ("kata",)
    assert config.exemptions.namespaces == ("kube-system",)


def test_au7_pod_security_configuration_by_relative_path(tmp_path: Path) -> None:
    (tmp_path / "podsecurity.yaml").write_text(POD_SECURITY)
    config = settings(tmp_path, admission("- name: PodSecurity\n  path: podsecurity.yaml\n"))
    assert config is not None and config.defaults == EXPECTED.defaults


def test_au7_default_is_privileged_and_the_plugin_can_be_disabled(tmp_path: Path) -> None:
    assert pod_security_config(parse_settings([])) == PodSecurityConfig()
    assert PodSecurityConfig().defaults == Policy()  # privileged:latest everywhere
    assert settings(tmp_path, admission("- name: Other\n  configuration: {}\n")) == (
        PodSecurityConfig())
    assert pod_security_config(parse_settings(
        ["--disable-admission-plugins", "ServiceAccount,PodSecurity"])) is None


def test_au7_invalid_configuration_stops_the_apiserver_with_the_field(tmp_path: Path) -> None:
    bad = POD_SECURITY.replace("enforce: baseline", "enforce: strict")
    inline = "\n".join("    " + line for line in bad.splitlines())
    with pytest.raises(SystemExit, match=r'defaults\.enforce: Invalid value: "strict"'):
        settings(tmp_path, admission(f"- name: PodSecurity\n  configuration:\n{inline}\n"))
    with pytest.raises(SystemExit, match="must be an AdmissionConfiguration"):
        settings(tmp_path, "kind: Something\n")
