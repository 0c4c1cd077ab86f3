"""`secret` and `configMap` sources of a projected volume (Kubernetes' projected volume
plugin): every key or `items` (key → path, mode), `optional`, `defaultMode`, all sources in
one directory next to the downwardAPI files."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from skiff.client.fake import FakeClient
from skiff.kubelet.configsources import ConfigError, config_volumes, refresh_config_volumes
from skiff.kubelet.projected import write_projected_volumes


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _api() -> FakeClient:
    """The apiserver with the demo's two Secrets and ConfigMap in `default`."""
    def obj(kind: str, name: str, data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": kind,
                "metadata": {"name": name, "namespace": "default"}, "data": data}
    return FakeClient(obj("Secret", "user", {"user": _b64("admin")}),
                      obj("Secret", "pass", {"pass": _b64("1f2d1e2e67df")}),
                      obj("ConfigMap", "myconfigmap", {"config": "c=1", "other": "o"}))


def _pod(sources: list[dict[str, Any]], default_mode: int | None = None) -> dict[str, Any]:
    projected: dict[str, Any] = {"sources": sources}
    if default_mode is not None:
        projected["defaultMode"] = default_mode
    return {"metadata": {"name": "test-projected-volume", "namespace": "default",
                         "uid": "u1", "labels": {"app": "demo"}},
            "spec": {"containers": [{"name": "c"}],
                     "volumes": [{"name": "all-in-one", "projected": projected}]}}


def _write(api: FakeClient, pod: dict[str, Any], root: Path) -> Path:
    asyncio.run(write_projected_volumes(pod, root, api))
    asyncio.run(refresh_config_volumes(api, pod, lambda name: root / name))
    return root / "all-in-one"


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_sb3_projected_volume_writes_secret_configmap_and_downward_api_sources(
        tmp_path: Path) -> None:
    pod = _pod([{"secret": {"name": "user"}}, {"secret": {"name": "pass"}},
                {"configMap": {"name": "myconfigmap", "items": [
                    {"key": "config", "path": "my-group/my-config"}]}},
                {"downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}])
    assert config_volumes(pod)  # so the pod worker keeps the files current
    volume = _write(_api(), pod, tmp_path)
    assert (volume / "user").read_text() == "admin"
    assert (volume / "pass").read_text() == "1f2d1e2e67df"
    assert (volume / "my-group" / "my-config").read_text() == "c=1"
    assert not (volume / "other").exists() and not (volume / "config").exists()
    assert (volume / "labels").read_text() == 'app="demo"'


def test_sb3_projected_items_mode_and_default_mode(tmp_path: Path) -> None:
    pod = _pod([{"secret": {"name": "user", "items": [
                    {"key": "user", "path": "u", "mode": 0o400}]}},
                {"configMap": {"name": "myconfigmap"}}], default_mode=0o640)
    volume = _write(_api(), pod, tmp_path)
    assert _mode(volume / "u") == 0o400
    assert _mode(volume / "config") == 0o640 and _mode(volume / "other") == 0o640


def test_sb3_projected_source_follows_updates_and_removed_keys(tmp_path: Path) -> None:
    api = _api()
    pod = _pod([{"configMap": {"name": "myconfigmap"}}, {"downwardAPI": {"items": [
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}])
    volume = _write(api, pod, tmp_path)
    api.add({"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "myconfigmap", "namespace": "default"},
             "data": {"config": "c=2"}})
    asyncio.run(refresh_config_volumes(api, pod, lambda name: tmp_path / name))
    assert (volume / "config").read_text() == "c=2" and not (volume / "other").exists()
    assert (volume / "name").read_text() == "test-projected-volume"  # left alone


def test_sb3_projected_optional_missing_source_or_key_is_skipped(tmp_path: Path) -> None:
    pod = _pod([{"secret": {"name": "absent", "optional": True}},
                {"configMap": {"name": "myconfigmap", "optional": True, "items": [
                    {"key": "nokey", "path": "x"}, {"key": "config", "path": "y"}]}}])
    volume = _write(_api(), pod, tmp_path)
    assert sorted(p.name for p in volume.iterdir() if not p.name.startswith(".")) == ["y"]


@pytest.mark.parametrize(("source", "message"), [
    pytest.param({"secret": {"name": "absent"}}, 'secret "absent" not found', id="secret"),
    pytest.param({"configMap": {"name": "myconfigmap", "items": [{"key": "nokey",
                                                                  "path": "x"}]}},
                 "non-existent configmap key: nokey", id="key"),
])
def test_sb3_projected_missing_required_source_is_a_config_error(
        tmp_path: Path, source: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        asyncio.run(refresh_config_volumes(_api(), _pod([source]),
                                           lambda name: tmp_path / name))


def test_sb3_service_account_volume_is_not_a_config_volume() -> None:
    # kube-root-ca.crt comes from the kubelet's --root-ca-file (projected.py)
    pod = _pod([{"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [
                    {"key": "ca.crt", "path": "ca.crt"}]}}])
    assert config_volumes(pod) == []
