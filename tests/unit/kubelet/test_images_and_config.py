"""Images without a command and ConfigMap volume files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skiff.kubelet.configsources import write_config_volume
from skiff.kubelet.runtime.images import container_command, image_name


@pytest.mark.parametrize(("image", "name"), [
    pytest.param("nginx", "nginx", id="bare"),
    pytest.param("nginx:1.27", "nginx", id="tag"),
    pytest.param("docker.io/library/nginx:1.27@sha256:ab", "nginx", id="registry-digest"),
    pytest.param("ghcr.io/org/app:v1", "org/app", id="org"),
    pytest.param("localhost:5000/app", "app", id="local-registry"),
])
def test_issue16_image_name_drops_registry_and_tag(image: str, name: str) -> None:
    assert image_name(image) == name


def test_issue16_command_wins_then_table_then_stand_in_with_probe_ports() -> None:
    assert container_command({"command": ["sleep"], "args": ["1"]}, {}) == ["sleep", "1"]
    assert container_command({"image": "redis:7", "args": ["--port", "1"]},
                             {"redis": ["redis-server"]}) == ["redis-server", "--port", "1"]
    standin = container_command({"image": "nginx", "ports": [
        {"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"port": "http"}},
        "livenessProbe": {"tcpSocket": {"port": 9090}}}, {})
    assert standin == [sys.executable, "-P", "-m", "skiff.kubelet.runtime.standin",
                       "--port", "8080", "--port", "9090"]


def test_sb4_args_alone_run_for_an_image_without_entrypoint_as_kubectl_run_makes() -> None:
    # `kubectl run --image=busybox x -- sh -c 'read l'` sets only `args`
    assert container_command({"image": "busybox", "args": ["sh", "-c", "read l"]}, {}) == [
        "sh", "-c", "read l"]
    assert container_command({"image": "docker.io/library/alpine:3", "args": ["true"]},
                             {}) == ["true"]
    # no args: still the stand-in (busybox's `sh` would exit at once without a terminal)
    assert container_command({"image": "busybox"}, {})[2:4] == ["-m",
                                                               "skiff.kubelet.runtime.standin"]


def test_issue16_config_volume_files_follow_the_object(tmp_path: Path) -> None:
    write_config_volume(tmp_path, {"a": "1", "b": "2"}, None)
    assert (tmp_path / "a").read_text() == "1" and (tmp_path / "b").read_text() == "2"
    write_config_volume(tmp_path, {"a": "3"}, None)
    assert (tmp_path / "a").read_text() == "3" and not (tmp_path / "b").exists()
    write_config_volume(tmp_path, {"a": "3"}, [{"key": "a", "path": "sub/x"}])
    assert (tmp_path / "sub" / "x").read_text() == "3" and not (tmp_path / "a").exists()
