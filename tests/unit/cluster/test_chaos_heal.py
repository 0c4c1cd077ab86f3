"""`skiff chaos heal` (all components) on the TLS compose cluster: the one-shot `pki`
service runs with `network_mode: none` and was never on the project's network; healing must
leave it alone instead of failing on `docker network connect` (found by
tests/integration/compose/test_compose.py)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.cluster.chaos import docker as chaos


@pytest.mark.parametrize("mode", ["none", "host", "container:abc"])
def test_heal_leaves_containers_without_a_project_network_alone(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []

    def docker(*args: str, **_: Any) -> str:
        calls.append(args)
        return "[]"

    monkeypatch.setattr(chaos, "_docker", docker)
    container = {"Id": "c1", "HostConfig": {"NetworkMode": mode},
                 "NetworkSettings": {"Networks": {}}, "State": {"Running": False}}
    assert chaos._heal_one(container, service="pki", project="p") == ""
    assert calls == []
